/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shared-memory segments of the shm transport (/dev/shm/dfccl-<pid>-...),
 * in real separate processes under the harness timeout:
 *  - modes: while a run goes on (after group creation and registration,
 *    before and after the collectives run), every segment of these
 *    processes has mode 0600 and belongs to this user; after dfcclDestroy
 *    on every rank, no dfccl-<pid>- segment of any rank is left;
 *  - a killed rank: one rank registers collectives that no peer has
 *    attached yet and is SIGKILLed while the others run a collective with
 *    it. The survivors must not hang: dfcclWait(id, 2000 ms) returns
 *    DFCCL_ERR_TIMEOUT and they exit (dfcclDestroy would refuse with
 *    DFCCL_ERR_BUSY while the collective is in flight), or, where the
 *    context detects the dead rank itself, DFCCL_ERR_ABORTED, and they
 *    destroy the context. Then the segments left in /dev/shm by the killed
 *    rank and by the survivors are listed;
 *    once every process of the job has exited, a dfcclInit in a new
 *    process must remove them all;
 *  - the sweep itself: of segments named for a dead process of this pid
 *    namespace, for the same pid in another namespace and for a live
 *    process, dfcclInit removes only the first;
 *  - names go while the job runs (issue 55, item 5): on 3 and 4 ranks, with
 *    ring collectives only (whose segments only the ring predecessor writes
 *    into), no segment name is left once the collectives have run, nor
 *    after registrations that add segments without running them, so that
 *    a job killed later leaves nothing in /dev/shm.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mp.h"
#include "rel_colls.h"
#include "suite.h"

#define SHM_DIR      "/dev/shm"
#define SHM_MAXRANKS 8

/* Which rank created /dev/shm/<name>: the pid in dfccl-<pid>-..., if it is
 * one of pids[0..n), else -1. */
static int shm_owner(const char *name, const int *pids, int n)
{
    char *end;
    long pid;

    if (strncmp(name, "dfccl-", 6) != 0) {
        return -1;
    }
    pid = strtol(name + 6, &end, 10);
    if (end == name + 6 || *end != '-') {
        return -1;
    }
    for (int r = 0; r < n; r++) {
        if (pids[r] == pid) {
            return r;
        }
    }
    return -1;
}

/* dfcclInit and dfcclDestroy (host backend) in a new process, as the next
 * job on this host would: 0 if both succeeded. */
static int fresh_init(void)
{
    int status = 0;
    pid_t pid  = fork();

    if (pid == 0) {
        dfccl_config_t cfg;
        dfccl_rank_ctx_t ctx;
        if (dfcclConfigInit(&cfg) != DFCCL_OK) {
            _exit(2);
        }
        cfg.backend = DFCCL_BACKEND_HOST;
        if (dfcclInit(&cfg, &ctx) != DFCCL_OK || dfcclDestroy(ctx) != DFCCL_OK) {
            _exit(3);
        }
        _exit(0);
    }
    if (pid < 0 || waitpid(pid, &status, 0) != pid) {
        return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

typedef struct {
    int found;    /* segments of these pids */
    int bad_mode; /* of which not 0600 or not ours */
} shm_scan_t;

/* List the dfccl segments of pids[0..n); with `unlink_them`, remove them.
 * `what` labels the printed lines. */
static shm_scan_t shm_scan(const int *pids, int n, const char *what, int print, int unlink_them)
{
    shm_scan_t s = {0, 0};
    DIR *d       = opendir(SHM_DIR);
    struct dirent *e;

    if (d == NULL) {
        fprintf(stderr, "cannot list %s: %s\n", SHM_DIR, strerror(errno));
        s.bad_mode = 1;
        return s;
    }
    while ((e = readdir(d)) != NULL) {
        char path[512];
        struct stat st;
        int r = shm_owner(e->d_name, pids, n);

        if (r < 0) {
            continue;
        }
        snprintf(path, sizeof(path), "%s/%s", SHM_DIR, e->d_name);
        if (stat(path, &st) != 0) {
            continue; /* unlinked meanwhile */
        }
        s.found++;
        if ((st.st_mode & 07777) != 0600 || st.st_uid != getuid()) {
            s.bad_mode++;
            fprintf(stderr, "%s: %s has mode %04o and owner %u, expected 0600 and %u\n", what,
                    path, (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid,
                    (unsigned)getuid());
        }
        if (print) {
            printf("%s: %s (rank %d, %lld bytes, mode %04o)\n", what, path, r,
                   (long long)st.st_size, (unsigned)(st.st_mode & 07777));
        }
        if (unlink_them) {
            unlink(path);
        }
    }
    closedir(d);
    return s;
}

/* ---- modes, and nothing left after dfcclDestroy -------------------------- */

/* Shared with the parent: the ranks' pids. */
typedef struct {
    int pids[SHM_MAXRANKS];
    int survivor_status[SHM_MAXRANKS];
    int survivor_done[SHM_MAXRANKS];
} shm_shared_t;

static shm_shared_t *shm_shared;

/* Every rank's pid, into pids[0..n) and shm_shared. */
static void shm_share_pids(dfccl_test_oob_t *oob, int *pids, int n)
{
    int pid = (int)getpid();

    dfccl_test_oob_allgather(&pid, pids, sizeof(pid), oob);
    memcpy(shm_shared->pids, pids, sizeof(int) * (size_t)n);
}

/* dfccl_test_mp_run of a body that shares its ranks' pids (shm_share_pids):
 * the segments of a failed run are removed, not left behind. */
static int shm_mp_run(int n, double timeout_s, dfccl_test_rank_fn_t body)
{
    int rc = dfccl_test_mp_run(n, timeout_s, body, NULL);

    if (rc != 0) {
        shm_scan(shm_shared->pids, n, "cleaned after failure", 1, 1);
    }
    return rc;
}

static int shm_check_now(int rank, int n, const int *pids, const char *what, int *total_p)
{
    shm_scan_t s = shm_scan(pids, n, what, 0, 0);

    DFCCL_TEST_CHECK(s.bad_mode == 0, "%s: %d segment(s) with a wrong mode", what, s.bad_mode);
    if (rank == 0) {
        printf("modes %s: %d dfccl segment(s) of these %d ranks, all 0600\n", what, s.found, n);
    }
    *total_p += s.found;
    return 0;
}

static int modes_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g[2];
    rel_coll_t c[4];
    int pids[SHM_MAXRANKS], total = 0;
    dfccl_status_t st;

    shm_share_pids(oob, pids, n);
    /* Segments are attached, and their names removed, by the poller thread
     * within milliseconds: in explicit progress mode they stay until the
     * ranks progress, so that the checks below see them and their modes. */
    setenv("DFCCL_PROGRESS", "explicit", 1);
    /* and no profile at creation: its collectives would progress the
     * ranks, and its registrations make the segments that those below
     * then fit in, already attached */
    setenv("DFCCL_PROFILE", "off", 1);
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g[0]);
    unsetenv("DFCCL_PROGRESS");
    DFCCL_TEST_CHECK(dfcclGroupCreate(ctx, n, rank, dfccl_test_oob_allgather, oob, "second",
                                      &g[1]) == DFCCL_OK, "group");
    dfccl_test_barrier(oob);
    if (shm_check_now(rank, n, pids, "after group creation", &total)) {
        return 1;
    }
    dfccl_test_barrier(oob);
    /* Rank 0 registers first: its segments exist and nobody has attached
     * them yet (its predecessor has not registered). */
    for (int phase = 0; phase < 2; phase++) {
        if ((phase == 0) == (rank == 0)) {
            for (int k = 0; k < 4; k++) {
                memset(&c[k], 0, sizeof(c[k]));
                c[k].kind  = (rel_kind_t)k;
                c[k].type  = DFCCL_INT32;
                c[k].op    = DFCCL_SUM;
                c[k].count = 1000 + 5000 * (size_t)k;
                c[k].salt  = k;
                st = rel_coll_setup(&c[k], ctx, g[k % 2], rank, n, 0);
                DFCCL_TEST_CHECK(st == DFCCL_OK, "register: %s", dfcclGetLastErrorMessage());
            }
        }
        dfccl_test_barrier(oob);
        if (shm_check_now(rank, n, pids, phase == 0 ? "after rank 0 registered" :
                                                      "after all registered, before running",
                          &total)) {
            return 1;
        }
        dfccl_test_barrier(oob);
    }
    for (int round = 0; round < 2; round++) {
        for (int k = 0; k < 4; k++) {
            rel_coll_fill(&c[k], ctx, round);
            DFCCL_TEST_CHECK(rel_coll_run(&c[k], ctx) == DFCCL_OK, "run");
        }
        for (int k = 0; k < 4; k++) {
            DFCCL_TEST_CHECK(dfcclWait(c[k].id, dfccl_test_wait_ms(60000), ctx) == DFCCL_OK,
                             "wait");
            DFCCL_TEST_CHECK(rel_coll_check(&c[k], ctx, round) == 0, "result");
        }
        dfccl_test_barrier(oob);
        if (shm_check_now(rank, n, pids, round == 0 ? "after the first run" :
                                                      "after the second run", &total)) {
            return 1;
        }
        dfccl_test_barrier(oob);
    }
    if (rank == 0) {
        DFCCL_TEST_CHECK(total > 0, "never saw a dfccl segment: the mode check checked nothing");
    }
    for (int k = 0; k < 4; k++) {
        DFCCL_TEST_CHECK(rel_coll_teardown(&c[k], ctx) == DFCCL_OK, "deregister");
    }
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy: %s", dfcclGetLastErrorMessage());
    dfccl_test_barrier(oob);
    {
        shm_scan_t s = shm_scan(pids, n, "left after dfcclDestroy", 1, 0);
        DFCCL_TEST_CHECK(s.found == 0, "%d dfccl segment(s) of these ranks left after "
                         "dfcclDestroy on every rank", s.found);
    }
    if (rank == 0) {
        printf("modes: nothing of these %d ranks left in %s after dfcclDestroy\n", n, SHM_DIR);
    }
    return 0;
}

START_TEST(test_modes)
{
    for (int n = 2; n <= 3; n++) {
        ck_assert_int_eq(shm_mp_run(n, 60, modes_body), 0);
    }
}
END_TEST

/* ---- names go while the job runs ---------------------------------------- */

/* Wait (a bounded time, scaled) until no dfccl segment of pids[0..n) is
 * left in /dev/shm: every rank's poller attaches new segments and removes
 * attached ones every 10 ms. The count left. */
static int shm_wait_gone(const int *pids, int n)
{
    struct timespec t0, t;
    int found;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        found = shm_scan(pids, n, "linked", 0, 0).found;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (found == 0 || (double)(t.tv_sec - t0.tv_sec) > 20 * dfccl_test_scale()) {
            return found;
        }
        usleep(10000);
    }
}

#define GONE_EXTRA 24 /* registrations past the first segment (8 MiB on the host) */

static int gone_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    rel_coll_t c[3], extra[GONE_EXTRA];
    int pids[SHM_MAXRANKS], left;

    (void)arg;
    shm_share_pids(oob, pids, n);
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    /* ring collectives only (beyond the one-shot sizes): the ring
     * predecessor is the only rank that writes into their connectors */
    for (int k = 0; k < 3; k++) {
        memset(&c[k], 0, sizeof(c[k]));
        c[k].kind  = k == 0 ? REL_ALLREDUCE : k == 1 ? REL_ALLGATHER : REL_BROADCAST;
        c[k].type  = DFCCL_FLOAT32;
        c[k].op    = DFCCL_SUM;
        c[k].count = 100000;
        c[k].salt  = k;
        DFCCL_TEST_CHECK(rel_coll_setup(&c[k], ctx, g, rank, n, 0) == DFCCL_OK, "register");
    }
    for (int k = 0; k < 3; k++) {
        rel_coll_fill(&c[k], ctx, 0);
        DFCCL_TEST_CHECK(rel_coll_run(&c[k], ctx) == DFCCL_OK, "run");
        DFCCL_TEST_CHECK(dfcclWait(c[k].id, dfccl_test_wait_ms(60000), ctx) == DFCCL_OK, "wait");
        DFCCL_TEST_CHECK(rel_coll_check(&c[k], ctx, 0) == 0, "result");
    }
    dfccl_test_barrier(oob);
    left = shm_wait_gone(pids, n);
    DFCCL_TEST_CHECK(left == 0, "%d ranks: %d segment name(s) still linked after the "
                     "collectives ran", n, left);
    dfccl_test_barrier(oob);
    /* new segments, registered and never run */
    for (int k = 0; k < GONE_EXTRA; k++) {
        extra[k]       = c[0];
        extra[k].count = 1 << 20;
        extra[k].salt  = 3 + k;
        DFCCL_TEST_CHECK(rel_coll_setup(&extra[k], ctx, g, rank, n, 0) == DFCCL_OK,
                         "register: %s", dfcclGetLastErrorMessage());
    }
    dfccl_test_barrier(oob);
    left = shm_wait_gone(pids, n);
    DFCCL_TEST_CHECK(left == 0, "%d ranks: %d segment name(s) still linked after "
                     "registrations that were not run", n, left);
    if (rank == 0) {
        printf("names gone: no segment of the %d ranks linked while they run\n", n);
    }
    dfccl_test_barrier(oob);
    for (int k = 0; k < GONE_EXTRA; k++) {
        DFCCL_TEST_CHECK(rel_coll_teardown(&extra[k], ctx) == DFCCL_OK, "deregister");
    }
    for (int k = 0; k < 3; k++) {
        DFCCL_TEST_CHECK(rel_coll_teardown(&c[k], ctx) == DFCCL_OK, "deregister");
    }
    DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_OK, "destroy");
    return 0;
}

START_TEST(test_names_gone)
{
    for (int n = 3; n <= 4; n++) {
        ck_assert_int_eq(shm_mp_run(n, 120, gone_body), 0);
    }
}
END_TEST

/* ---- a rank killed in the middle of a run -------------------------------- */

#define KILL_RANKS  3
#define KILL_VICTIM 1
#define KILL_EXTRA  24 /* registrations of the victim alone: new segments */

static int kill_body(int rank, int n, dfccl_test_oob_t *oob, void *arg)
{
    dfccl_rank_ctx_t ctx;
    dfccl_group_t g;
    rel_coll_t a, b, extra[KILL_EXTRA];
    int pid = (int)getpid();
    dfccl_status_t st;

    dfccl_test_oob_allgather(&pid, shm_shared->pids, sizeof(pid), oob);
    dfccl_test_setup(rank, n, oob, NULL, &ctx, &g);
    memset(&a, 0, sizeof(a));
    a.kind  = REL_ALLREDUCE;
    a.type  = DFCCL_FLOAT32;
    a.op    = DFCCL_SUM;
    a.count = 4096;
    b       = a;
    b.count = 1 << 20;
    b.salt  = 1;
    DFCCL_TEST_CHECK(rel_coll_setup(&a, ctx, g, rank, n, 0) == DFCCL_OK, "register");
    DFCCL_TEST_CHECK(rel_coll_setup(&b, ctx, g, rank, n, 0) == DFCCL_OK, "register");
    /* one good run: every connector of a and b is attached */
    rel_coll_fill(&a, ctx, 0);
    DFCCL_TEST_CHECK(rel_coll_run(&a, ctx) == DFCCL_OK, "run");
    DFCCL_TEST_CHECK(dfcclWait(a.id, dfccl_test_wait_ms(60000), ctx) == DFCCL_OK, "wait");
    DFCCL_TEST_CHECK(rel_coll_check(&a, ctx, 0) == 0, "result");
    dfccl_test_barrier(oob);

    if (rank == KILL_VICTIM) {
        /* registrations nobody else makes: segments no peer ever attaches */
        for (int k = 0; k < KILL_EXTRA; k++) {
            extra[k]       = a;
            extra[k].count = 1 << 20;
            extra[k].salt  = 2 + k;
            DFCCL_TEST_CHECK(rel_coll_setup(&extra[k], ctx, g, rank, n, 0) == DFCCL_OK,
                             "register extra: %s", dfcclGetLastErrorMessage());
        }
        dfccl_test_barrier(oob); /* the others start b now */
        usleep(20000);
        kill(getpid(), SIGKILL);
        pause();
    }
    dfccl_test_barrier(oob);
    rel_coll_fill(&b, ctx, 1);
    DFCCL_TEST_CHECK(rel_coll_run(&b, ctx) == DFCCL_OK, "run");
    /* short on purpose: either outcome is right (the dead rank found, or
     * this wait over), and neither may take long */
    st = dfcclWait(b.id, 2000, ctx);
    shm_shared->survivor_status[rank] = (int)st;
    shm_shared->survivor_done[rank]   = 1;
    printf("killed rank: survivor %d: dfcclWait(2000 ms) returned %s\n", rank,
           dfcclGetErrorString(st));
    fflush(stdout);
    /* DFCCL_ERR_ABORTED: the context noticed the dead rank by itself. */
    DFCCL_TEST_CHECK(st == DFCCL_ERR_TIMEOUT || st == DFCCL_ERR_ABORTED,
                     "expected a timeout (or an abort), got %s", dfcclGetErrorString(st));
    if (st == DFCCL_ERR_TIMEOUT) {
        /* b is in flight: dfcclDestroy refuses. Just exit. */
        DFCCL_TEST_CHECK(dfcclDestroy(ctx) == DFCCL_ERR_BUSY, "destroy with b in flight");
    } else {
        st = dfcclDestroy(ctx);
        printf("killed rank: survivor %d: dfcclDestroy of the aborted context returned %s\n",
               rank, dfcclGetErrorString(st));
    }
    return 0;
}

START_TEST(test_killed_rank)
{
    struct timespec t0, t1;
    double secs;
    int rc, survivors = 0;
    shm_scan_t left, victim;
    int vpid;

    memset(shm_shared, 0, sizeof(*shm_shared));
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = dfccl_test_mp_run(KILL_RANKS, 60, kill_body, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    /* the victim died of SIGKILL, so the harness reports a failure */
    ck_assert_int_ne(rc, 0);
    ck_assert_msg(secs < 55.0 * dfccl_test_scale_max(), "the run took %.0f s: the harness "
                  "timeout fired (a hang)", secs);
    for (int r = 0; r < KILL_RANKS; r++) {
        if (r != KILL_VICTIM && shm_shared->survivor_done[r] &&
            (shm_shared->survivor_status[r] == DFCCL_ERR_TIMEOUT ||
             shm_shared->survivor_status[r] == DFCCL_ERR_ABORTED)) {
            survivors++;
        }
    }
    ck_assert_msg(survivors == KILL_RANKS - 1, "only %d of %d survivors got DFCCL_ERR_TIMEOUT or _ABORTED",
                  survivors, KILL_RANKS - 1);
    printf("killed rank: the %d survivors got a timeout or an abort and exited after %.1f s\n",
           survivors, secs);

    vpid   = shm_shared->pids[KILL_VICTIM];
    victim = shm_scan(&vpid, 1, "left by the killed rank", 1, 0);
    left   = shm_scan(shm_shared->pids, KILL_RANKS, "left in all", 0, 0);
    printf("killed rank: %d segment(s) of the killed rank (pid %d) and %d of the survivors "
           "were left in %s\n", victim.found, vpid, left.found - victim.found, SHM_DIR);
    /* every process of the job has exited: the next dfcclInit on this host
     * (in this pid namespace) removes what they left */
    ck_assert_int_eq(fresh_init(), 0);
    left = shm_scan(shm_shared->pids, KILL_RANKS, "left after the next dfcclInit", 1, 1);
    ck_assert_msg(left.found == 0, "%d segment(s) of the dead job were still in %s after "
                  "the next dfcclInit", left.found, SHM_DIR);
    printf("killed rank: the next dfcclInit removed them all\n");
}
END_TEST

/* Segments named for dead processes are swept at dfcclInit, but only those
 * of this pid namespace, never a live process's. */
START_TEST(test_sweep)
{
    struct stat st;
    char dead_ours[128], dead_other[128], live[128], path[160];
    const char *names[3] = {dead_ours, dead_other, live};
    unsigned long ns;
    pid_t dead = fork();

    if (dead == 0) {
        _exit(0);
    }
    ck_assert_int_gt(dead, 0);
    waitpid(dead, NULL, 0);
    if (stat("/proc/self/ns/pid", &st) != 0) {
        printf("sweep: /proc/self/ns/pid is not readable: dfccl cannot tell its pid namespace "
               "and sweeps nothing; skipped\n");
        return;
    }
    ns = (unsigned long)st.st_ino;
    snprintf(dead_ours, sizeof(dead_ours), "/dfccl-%d-%lx-test-dead", (int)dead, ns);
    snprintf(dead_other, sizeof(dead_other), "/dfccl-%d-%lx-test-otherns", (int)dead, ns + 1);
    snprintf(live, sizeof(live), "/dfccl-%d-%lx-test-live", (int)getpid(), ns);
    for (int i = 0; i < 3; i++) {
        int fd = shm_open(names[i], O_CREAT | O_EXCL | O_RDWR, 0600);
        ck_assert_msg(fd >= 0, "shm_open(%s): %s", names[i], strerror(errno));
        close(fd);
    }
    ck_assert_int_eq(fresh_init(), 0);
    snprintf(path, sizeof(path), "%s%s", SHM_DIR, dead_ours);
    ck_assert_msg(access(path, F_OK) != 0, "%s (a dead process of this pid namespace) was not "
                  "removed by dfcclInit", path);
    for (int i = 1; i < 3; i++) {
        snprintf(path, sizeof(path), "%s%s", SHM_DIR, names[i]);
        ck_assert_msg(access(path, F_OK) == 0, "%s was removed, but %s", path,
                      i == 1 ? "its pid belongs to another namespace" : "its process lives");
        shm_unlink(names[i]);
    }
    printf("sweep: dfcclInit removed the dead process's segment and kept the live one and "
           "the other namespace's\n");
}
END_TEST

int main(void)
{
    Suite *s  = suite_create("shm");
    TCase *tc = dfccl_test_case(s, "segments", 600);

    if (getenv("DFCCL_BACKEND") == NULL) {
        setenv("DFCCL_BACKEND", "host", 1);
    }
    /* the segments under test are the shm transport's: on GPUs the default
     * is P2P (device memory shared through CUDA IPC), so ask for shm */
    setenv("DFCCL_TRANSPORT", "shm", 1);
    shm_shared = mmap(NULL, sizeof(*shm_shared), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shm_shared == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    /* the checks run in the harness's children; Check's own fork would
     * hide the shared page, so it runs the tests in this process */
    tcase_add_test(tc, test_modes);
    tcase_add_test(tc, test_names_gone);
    tcase_add_test(tc, test_killed_rank);
    tcase_add_test(tc, test_sweep);
    return dfccl_test_run(s, CK_VERBOSE);
}

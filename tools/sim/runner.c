/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Running many rounds on several threads.  Each worker owns one round state
 * and takes round indices from a shared counter; a round's result depends
 * only on (seed, index), so the totals are the same for any thread count.
 * While the workers run, the calling thread reports progress on stderr when
 * asked to: on a terminal a line rewritten in place, in a log a line every
 * DFCCL_SIM_LOG_PERIOD seconds with the rate and an estimate of the time left.
 */
#include "sim.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* seconds between two progress lines in a log */
#define DFCCL_SIM_LOG_PERIOD 10.0

typedef struct dfccl_sim_runner {
    const dfccl_sim_world_t      *world;
    const dfccl_sim_run_params_t *params;
    atomic_uint_fast64_t          next;       /* next round index to take */
    atomic_uint_fast64_t          finished;
    atomic_uint_fast64_t          deadlocks;
    atomic_uint_fast64_t          stepped;
    atomic_uint_fast64_t          stalled;
    atomic_uint_fast64_t          events;
    atomic_int                    failed;
    /* the workers still running, so that the reporting thread wakes up at
     * once when they are done instead of at its next report */
    pthread_mutex_t               lock;
    pthread_cond_t                done;
    int                           running;
} dfccl_sim_runner_t;

typedef struct dfccl_sim_worker {
    dfccl_sim_runner_t *runner;
    pthread_t           thread;
} dfccl_sim_worker_t;

static double dfccl_sim_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void dfccl_sim_worker_exit(dfccl_sim_runner_t *runner)
{
    pthread_mutex_lock(&runner->lock);
    if (--runner->running == 0) {
        pthread_cond_signal(&runner->done);
    }
    pthread_mutex_unlock(&runner->lock);
}

static void *dfccl_sim_worker_main(void *arg)
{
    dfccl_sim_worker_t *worker = arg;
    dfccl_sim_runner_t *runner = worker->runner;
    uint64_t rounds            = runner->params->rounds;
    uint64_t stepped = 0, stalled = 0, events = 0, index;
    dfccl_sim_outcome_t outcome;
    dfccl_sim_round_t *round;

    if (dfccl_sim_round_create(runner->world, &round) != DFCCL_SIM_OK) {
        atomic_store(&runner->failed, 1);
        atomic_store(&runner->next, rounds);  /* stop the others too */
        dfccl_sim_worker_exit(runner);
        return NULL;
    }
    for (;;) {
        index = atomic_fetch_add(&runner->next, 1);
        if (index >= rounds) {
            break;
        }
        dfccl_sim_round_run(round, runner->params->seed, index, runner->params->flags,
                            &outcome);
        stepped   += (uint64_t)outcome.stepped;
        stalled   += (uint64_t)outcome.stalled;
        events    += outcome.events;
        /* publish per round, so that progress is live; rounds are long */
        atomic_fetch_add(&runner->finished, 1);
        if (outcome.deadlocked) {
            atomic_fetch_add(&runner->deadlocks, 1);
        }
    }
    atomic_fetch_add(&runner->stepped, stepped);
    atomic_fetch_add(&runner->stalled, stalled);
    atomic_fetch_add(&runner->events, events);
    dfccl_sim_round_destroy(round);
    dfccl_sim_worker_exit(runner);
    return NULL;
}

/* A duration for people: "42 s", "5 min 36 s", "2 h 07 min". */
static const char *dfccl_sim_duration(double seconds, char *buf, size_t len)
{
    unsigned long long s = (seconds > 0.0) ? (unsigned long long)(seconds + 0.5) : 0;

    if (s < 60) {
        snprintf(buf, len, "%llu s", s);
    } else if (s < 3600) {
        snprintf(buf, len, "%llu min %llu s", s / 60, s % 60);
    } else {
        snprintf(buf, len, "%llu h %02llu min", s / 3600, (s % 3600) / 60);
    }
    return buf;
}

/* Wait until the workers are done or until the time (dfccl_sim_now) is reached. */
static void dfccl_sim_wait(dfccl_sim_runner_t *runner, double until)
{
    struct timespec ts;
    double now;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    now         = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    until       = (until > now) ? until - now : 0.0;
    ts.tv_sec  += (time_t)until;
    ts.tv_nsec += (long)((until - (double)(time_t)until) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&runner->lock);
    while ((runner->running > 0) &&
           (pthread_cond_timedwait(&runner->done, &runner->lock, &ts) == 0)) {
    }
    pthread_mutex_unlock(&runner->lock);
}

static int dfccl_sim_running(dfccl_sim_runner_t *runner)
{
    int running;

    pthread_mutex_lock(&runner->lock);
    running = runner->running;
    pthread_mutex_unlock(&runner->lock);
    return running;
}

static void dfccl_sim_progress(dfccl_sim_runner_t *runner, double start, int mode, int last)
{
    uint64_t done  = atomic_load(&runner->finished);
    uint64_t dl    = atomic_load(&runner->deadlocks);
    uint64_t total = runner->params->rounds;
    double elapsed = dfccl_sim_now() - start;
    double rate    = (elapsed > 0.0) ? (double)done / elapsed : 0.0;
    char spent[32], left[48];

    if (mode == DFCCL_SIM_PROGRESS_TERMINAL) {
        fprintf(stderr, "\r%llu/%llu rounds (%.1f%%), %llu deadlocks, %.0f s%s",
                (unsigned long long)done, (unsigned long long)total,
                (total > 0) ? 100.0 * (double)done / (double)total : 100.0,
                (unsigned long long)dl, elapsed, last ? "\n" : "");
        fflush(stderr);
        return;
    }
    if (done == 0) {
        snprintf(left, sizeof(left), "time left not known yet");
    } else {
        dfccl_sim_duration((double)(total - done) / rate, spent, sizeof(spent));
        snprintf(left, sizeof(left), "about %s left", spent);
    }
    fprintf(stderr, "dfccl-sim: %llu of %llu rounds (%.1f%%), %llu deadlocks, %.3g rounds/s, "
            "%s elapsed, %s\n", (unsigned long long)done, (unsigned long long)total,
            (total > 0) ? 100.0 * (double)done / (double)total : 100.0,
            (unsigned long long)dl, rate, dfccl_sim_duration(elapsed, spent, sizeof(spent)),
            left);
    fflush(stderr);
}

dfccl_sim_status_t dfccl_sim_run(const dfccl_sim_world_t *world,
                                 const dfccl_sim_run_params_t *params,
                                 dfccl_sim_run_result_t *result_p)
{
    dfccl_sim_runner_t runner;
    dfccl_sim_worker_t *workers;
    dfccl_sim_status_t status = DFCCL_SIM_OK;
    int threads               = params->threads;
    pthread_condattr_t attr;
    int started, i, rc;
    double start, next, period;

    if ((uint64_t)threads > params->rounds) {
        threads = (params->rounds > 0) ? (int)params->rounds : 1;
    }
    if (threads < 1) {
        threads = 1;
    }
    memset(&runner, 0, sizeof(runner));
    runner.world  = world;
    runner.params = params;
    atomic_init(&runner.next, 0);
    atomic_init(&runner.finished, 0);
    atomic_init(&runner.deadlocks, 0);
    atomic_init(&runner.stepped, 0);
    atomic_init(&runner.stalled, 0);
    atomic_init(&runner.events, 0);
    atomic_init(&runner.failed, 0);
    runner.running = threads;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&runner.lock, NULL);
    pthread_cond_init(&runner.done, &attr);
    pthread_condattr_destroy(&attr);

    workers = dfccl_sim_calloc((size_t)threads, sizeof(*workers), "threads");
    if (workers == NULL) {
        status = DFCCL_SIM_ERR_NO_MEMORY;
        goto out_destroy_sync;
    }

    start = dfccl_sim_now();
    for (started = 0; started < threads; started++) {
        workers[started].runner = &runner;
        rc = pthread_create(&workers[started].thread, NULL, dfccl_sim_worker_main,
                            &workers[started]);
        if (rc != 0) {
            fprintf(stderr, "dfccl-sim: pthread_create() failed: %s\n", strerror(rc));
            status = DFCCL_SIM_ERR_SYSTEM;
            break;
        }
    }
    pthread_mutex_lock(&runner.lock);
    runner.running -= threads - started;
    pthread_mutex_unlock(&runner.lock);
    if (started == 0) {
        goto out_free_workers;
    }
    status = DFCCL_SIM_OK;  /* fewer threads than asked still finish the work */

    if (params->progress != DFCCL_SIM_PROGRESS_OFF) {
        period = (params->progress == DFCCL_SIM_PROGRESS_TERMINAL) ? 0.2 : DFCCL_SIM_LOG_PERIOD;
        next   = start;
        for (;;) {
            /* a late report moves the next one, rather than being caught up */
            next = (next + period > dfccl_sim_now()) ? next + period : dfccl_sim_now() + period;
            dfccl_sim_wait(&runner, next);
            if (dfccl_sim_running(&runner) == 0) {
                break;
            }
            dfccl_sim_progress(&runner, start, params->progress, 0);
        }
        if (params->progress == DFCCL_SIM_PROGRESS_TERMINAL) {
            dfccl_sim_progress(&runner, start, params->progress, 1);
        }
    }
    for (i = 0; i < started; i++) {
        pthread_join(workers[i].thread, NULL);
    }
    if (atomic_load(&runner.failed)) {
        fprintf(stderr, "dfccl-sim: out of memory for a thread's round state\n");
        status = DFCCL_SIM_ERR_NO_MEMORY;
        goto out_free_workers;
    }

    result_p->rounds    = params->rounds;
    result_p->deadlocks = atomic_load(&runner.deadlocks);
    result_p->stepped   = atomic_load(&runner.stepped);
    result_p->stalled   = atomic_load(&runner.stalled);
    result_p->events    = atomic_load(&runner.events);
    result_p->seconds   = dfccl_sim_now() - start;

out_free_workers:
    free(workers);
out_destroy_sync:
    pthread_cond_destroy(&runner.done);
    pthread_mutex_destroy(&runner.lock);
    return status;
}

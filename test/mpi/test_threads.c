/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The mpi_threads example, built as a test: run_mpi_tests.sh runs it under
 * mpirun with a timeout, so the deadlock case it shows fails the suite if
 * it ever hangs.
 */
#include "../../examples/mpi_threads.c"

# SPDX-License-Identifier: BSD-3-Clause
# DFCCL_CHECK_OMPI: MPI compiler for tests and examples, and the Open MPI
# devel headers (ompi_config.h) for the coll component. Sets MPICC,
# OMPI_CPPFLAGS, OMPI_LIBDIR, OMPI_COMPONENT_DIR and the conditionals HAVE_MPI
# and HAVE_OMPI.
AC_DEFUN([DFCCL_CHECK_OMPI], [
    AC_ARG_WITH([ompi], [AS_HELP_STRING([--with-ompi=DIR],
                [Open MPI include dir holding ompi_config.h (default: guess)])],
                [], [with_ompi=guess])
    AC_ARG_VAR([MPICC], [MPI C compiler wrapper])
    have_mpi=no; have_ompi=no; ompi_why=""
    AS_IF([test -z "$MPICC"], [AC_PATH_PROGS([MPICC], [mpicc])])
    AS_IF([test -n "$MPICC"], [have_mpi=yes])
    AS_IF([test "x$with_ompi" = xno], [ompi_why="(--without-ompi)"],
          [test "x$have_mpi" = xno], [ompi_why="(mpicc not found: apt-get install libopenmpi-dev)"], [
        AS_IF([test "x$with_ompi" = xguess -o "x$with_ompi" = xyes],
              [ompi_inc=`$MPICC --showme:incdirs 2>/dev/null | tr ' ' '\n' | grep -m1 openmpi`
               AS_IF([test -z "$ompi_inc"], [ompi_inc=`$MPICC --showme:incdirs 2>/dev/null | cut -d' ' -f1`])],
              [ompi_inc=$with_ompi])
        AS_IF([test -f "$ompi_inc/openmpi/ompi_config.h"], [ompi_sub="$ompi_inc/openmpi"],
              [test -f "$ompi_inc/ompi_config.h"], [ompi_sub="$ompi_inc"], [ompi_sub=""])
        AS_IF([test -n "$ompi_sub"], [
            have_ompi=yes
            OMPI_CPPFLAGS="-I$ompi_inc -I$ompi_sub"
            OMPI_LIBDIR=`$MPICC --showme:libdirs 2>/dev/null | cut -d' ' -f1`
            dnl Open MPI's own component directory, unless --prefix was given:
            dnl then $libdir/openmpi, for use with mca_base_component_path.
            AS_IF([test -z "$OMPI_COMPONENT_DIR"], [
                AS_IF([test "x$prefix" != xNONE],
                      [OMPI_COMPONENT_DIR='${libdir}/openmpi'],
                      [OMPI_COMPONENT_DIR=`ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p'`
                       AS_IF([test -z "$OMPI_COMPONENT_DIR"], [OMPI_COMPONENT_DIR="$OMPI_LIBDIR/openmpi"])])
            ])
        ], [ompi_why="(ompi_config.h not found under $ompi_inc: Open MPI devel headers missing)"])
    ])
    AC_ARG_VAR([OMPI_COMPONENT_DIR], [where make install puts mca_coll_dfccl.so (default: Open MPI's component dir, or \$libdir/openmpi with --prefix)])
    AC_SUBST([OMPI_CPPFLAGS])
    AC_SUBST([OMPI_LIBDIR])
    AM_CONDITIONAL([HAVE_MPI], [test "x$have_mpi" = xyes])
    AM_CONDITIONAL([HAVE_OMPI], [test "x$have_ompi" = xyes])
])

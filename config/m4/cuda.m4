# SPDX-License-Identifier: BSD-3-Clause
# DFCCL_CHECK_CUDA: two tiers. The CUDA runtime (headers + libcudart) lets the
# runtime drive GPUs; nvcc additionally builds the daemon kernel for GPUs.
# Sets CUDA_CPPFLAGS, CUDA_LDFLAGS, CUDA_LIBS, NVCC, NVCC_FLAGS and the
# conditionals HAVE_CUDA (runtime + nvcc) and HAVE_CUDART.
AC_DEFUN([DFCCL_CHECK_CUDA], [
    AC_ARG_WITH([cuda],
        [AS_HELP_STRING([--with-cuda=DIR], [CUDA toolkit (default: guess /usr/local/cuda)])],
        [], [with_cuda=guess])
    AC_ARG_VAR([NVCC], [CUDA compiler])
    AC_ARG_VAR([NVCC_ARCH], [nvcc -gencode flags (default: sm_80, sm_90 and PTX)])
    have_cudart=no; have_nvcc=no; cuda_why=""; nvcc_why=""
    AS_IF([test "x$with_cuda" = xno], [cuda_why="(--without-cuda)"; nvcc_why="(--without-cuda)"], [
        AS_IF([test "x$with_cuda" = xguess -o "x$with_cuda" = xyes],
              [cuda_dir=/usr/local/cuda], [cuda_dir=$with_cuda])
        CUDA_CPPFLAGS="-I$cuda_dir/include"
        CUDA_LDFLAGS="-L$cuda_dir/lib64 -L$cuda_dir/lib64/stubs -Wl,-rpath,$cuda_dir/lib64"
        save_CPPFLAGS=$CPPFLAGS; save_LDFLAGS=$LDFLAGS; save_LIBS=$LIBS
        CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"; LDFLAGS="$LDFLAGS $CUDA_LDFLAGS"
        AC_CHECK_HEADER([cuda_runtime_api.h], [
            AC_CHECK_LIB([cudart], [cudaGetDeviceCount], [have_cudart=yes; CUDA_LIBS="-lcudart"],
                         [cuda_why="(libcudart not found in $cuda_dir/lib64)"])
        ], [cuda_why="(cuda_runtime_api.h not found in $cuda_dir/include)"])
        CPPFLAGS=$save_CPPFLAGS; LDFLAGS=$save_LDFLAGS; LIBS=$save_LIBS
        AS_IF([test "x$have_cudart" = xyes], [
            AS_IF([test -z "$NVCC"], [AC_PATH_PROG([NVCC], [nvcc], [], [$cuda_dir/bin:$PATH])])
            AS_IF([test -n "$NVCC"], [have_nvcc=yes], [nvcc_why="(nvcc not found in $cuda_dir/bin or PATH)"])
        ], [nvcc_why="(no CUDA runtime)"])
        AS_IF([test "x$with_cuda" != xguess -a "x$have_nvcc" = xno],
              [AC_MSG_ERROR([CUDA requested by --with-cuda but not usable $cuda_why $nvcc_why])])
    ])
    AS_IF([test -z "$NVCC_ARCH"],
          [NVCC_ARCH="-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90"])
    dnl -Xcompiler=... (not "-Xcompiler x": libtool eats a bare -Xcompiler). The
    dnl kernel's host stubs must not need libstdc++: libdfccl is a C library.
    NVCC_FLAGS="-O3 -std=c++17 -Xcompiler=-fPIC,-fvisibility=hidden,-fno-exceptions,-fno-rtti,-fno-threadsafe-statics $NVCC_ARCH"
    AS_IF([test "x$have_cudart" = xyes], [AC_DEFINE([HAVE_CUDART], [1], [CUDA runtime available])])
    AS_IF([test "x$have_nvcc" = xyes], [AC_DEFINE([HAVE_CUDA], [1], [CUDA daemon kernel built])])
    AC_SUBST([CUDA_CPPFLAGS])
    AC_SUBST([CUDA_LDFLAGS])
    AC_SUBST([CUDA_LIBS])
    AC_SUBST([NVCC_FLAGS])
    AM_CONDITIONAL([HAVE_CUDA], [test "x$have_nvcc" = xyes])
    AM_CONDITIONAL([HAVE_CUDART], [test "x$have_cudart" = xyes])
])

# DFCCL_CHECK_NCCL: nccl.h + libnccl, for dfccl-bench --compare nccl only.
AC_DEFUN([DFCCL_CHECK_NCCL], [
    AC_ARG_WITH([nccl], [AS_HELP_STRING([--with-nccl=DIR], [NCCL for benchmark comparison])],
                [], [with_nccl=guess])
    have_nccl=no; nccl_why=""
    AS_IF([test "x$have_cudart" != xyes], [nccl_why="(no CUDA runtime)"],
          [test "x$with_nccl" = xno], [nccl_why="(--without-nccl)"], [
        AS_IF([test "x$with_nccl" != xguess -a "x$with_nccl" != xyes],
              [NCCL_CPPFLAGS="-I$with_nccl/include"; NCCL_LDFLAGS="-L$with_nccl/lib"])
        save_CPPFLAGS=$CPPFLAGS; save_LDFLAGS=$LDFLAGS; save_LIBS=$LIBS
        CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS $NCCL_CPPFLAGS"
        LDFLAGS="$LDFLAGS $CUDA_LDFLAGS $NCCL_LDFLAGS"
        AC_CHECK_HEADER([nccl.h], [
            AC_CHECK_LIB([nccl], [ncclCommInitRank], [have_nccl=yes; NCCL_LIBS="-lnccl"],
                         [nccl_why="(libnccl not found)"], [-lcudart])
        ], [nccl_why="(nccl.h not found)"])
        CPPFLAGS=$save_CPPFLAGS; LDFLAGS=$save_LDFLAGS; LIBS=$save_LIBS
    ])
    AS_IF([test "x$have_nccl" = xyes], [AC_DEFINE([HAVE_NCCL], [1], [NCCL available])])
    AC_SUBST([NCCL_CPPFLAGS])
    AC_SUBST([NCCL_LDFLAGS])
    AC_SUBST([NCCL_LIBS])
    AM_CONDITIONAL([HAVE_NCCL], [test "x$have_nccl" = xyes])
])

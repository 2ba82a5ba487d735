/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Stand-in for Open MPI's internal ompi/mpi/fortran/base/fint_2_int.h, which
 * the installed ompi/op/op.h includes but the distribution packages do not
 * ship. op.h only uses the scalar conversions between C int and MPI_Fint
 * (in inline code the component never calls); plain casts are right for
 * both sizes of Fortran INTEGER. The include guard matches Open MPI's, so a
 * source tree that has the real header wins when it comes first.
 */
#ifndef OMPI_FORTRAN_BASE_FINT_2_INT_H
#define OMPI_FORTRAN_BASE_FINT_2_INT_H

#define OMPI_INT_2_FINT(a) ((MPI_Fint)(a))
#define OMPI_FINT_2_INT(a) ((int)(a))

#endif

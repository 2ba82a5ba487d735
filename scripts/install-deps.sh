#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Install what dfccl needs to build and test on Debian/Ubuntu: the
# autotools, Check, json-c, Open MPI with its development headers, UCX,
# libxml2 (MSCCL algorithm programs), iproute2 (test_net_ns makes network
# namespaces where it may), and mpi4py
# with NumPy for Debian's python3 (the component's mpi4py test and example).
# The CUDA toolkit is optional and not installed here: configure uses it
# when /usr/local/cuda (or --with-cuda=DIR) has it.
set -euo pipefail
pkgs="build-essential autoconf automake libtool pkg-config check libjson-c-dev libxml2-dev
      libopenmpi-dev openmpi-bin libucx-dev iproute2 python3-mpi4py python3-numpy"
missing=""
for p in $pkgs; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    echo "installing:$missing"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
fi

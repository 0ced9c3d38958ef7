// The CUDA runtime surface (nvcc): topology from the launch, mesh, sharding, views, copy, and
// the device ops. Included only through <tilefoundry/runtime.h>.
#pragma once

#include <cute/tensor.hpp>

#include <tilefoundry/runtime/cuda/grid_residency.cuh>
#include <tilefoundry/runtime/cuda/topology.cuh>
#include <tilefoundry/topology.h>

#include <tilefoundry/copy.h>
#include <tilefoundry/host_program.h>
#include <tilefoundry/local.h>
#include <tilefoundry/mesh.h>
#include <tilefoundry/reduction.h>
#include <tilefoundry/shard.h>
#include <tilefoundry/shard_layout.h>
#include <tilefoundry/shard_partition.h>
#include <tilefoundry/shard_tensor.h>

#include <tilefoundry/ops/binary.h>
#include <tilefoundry/ops/copy_async.h>
#include <tilefoundry/ops/mma.h>
#include <tilefoundry/ops/reduce.h>
#include <tilefoundry/ops/sync.h>
#include <tilefoundry/ops/unary.h>

#include <tilefoundry/runtime/cuda/atoms/atoms.cuh>

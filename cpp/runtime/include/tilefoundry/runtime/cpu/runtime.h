// The CPU runtime surface (g++): topology bound by the host loop, mesh, sharding, views, copy.
// Included only through <tilefoundry/runtime.h>.
#pragma once

#include <cute/tensor.hpp>

#include <tilefoundry/host_program.h>
#include <tilefoundry/runtime/cpu/gemm.h>
#include <tilefoundry/runtime/cpu/host_entry.h>
#include <tilefoundry/runtime/cpu/topology.h>
#include <tilefoundry/topology.h>

#include <tilefoundry/copy.h>
#include <tilefoundry/local.h>
#include <tilefoundry/mesh.h>
#include <tilefoundry/reduction.h>
#include <tilefoundry/shard.h>
#include <tilefoundry/shard_layout.h>
#include <tilefoundry/shard_partition.h>
#include <tilefoundry/shard_tensor.h>

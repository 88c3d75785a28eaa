// lazyx: a lazy tensor engine. Include this header for the whole public API.
#pragma once

#include "lazyx/debug.h"
#include "lazyx/diagnostics.h"
#include "lazyx/dtype.h"
#include "lazyx/error.h"
#include "lazyx/memory.h"
#include "lazyx/metrics.h"
#include "lazyx/ops.h"
#include "lazyx/step.h"
#include "lazyx/tensor.h"
// [math ops]
#include "lazyx/math.h"

// [sort/scan ops]
#include "lazyx/sort.h"

// [conv ops]
#include "lazyx/conv.h"

// [pool ops]
#include "lazyx/pool.h"

// [sampling ops]
#include "lazyx/sampling.h"

#include <torch/library.h>

#include "kernels.h"

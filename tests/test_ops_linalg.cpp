// Linear algebra against hand-computed values: matmul in every rank combination (with batch
// broadcasting), mm, bmm, addmm with beta/alpha, t and transpose.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "lazyx/lazyx.h"
#include "ops_test_util.h"

namespace {

using namespace lazyx_ops_test;

// A = [[1,2,3],[4,5,6]], B = [[7,8],[9,10],[11,12]]; A @ B = [[58,64],[139,154]].
Tensor A() { return F32({1, 2, 3, 4, 5, 6}, {2, 3}); }
Tensor B() { return F32({7, 8, 9, 10, 11, 12}, {3, 2}); }

// b[j] = (j + 1) * M with M = [[1,0],[0,0],[0,1],[0,2]], shape [n,4,2]. For a row r of a
// [.,4] operand, r @ M = [r0, r2 + 2 r3].
Tensor ScaledM(int n) {
  std::vector<float> v;
  for (int j = 1; j <= n; ++j) {
    for (float m : {1, 0, 0, 0, 0, 1, 0, 2}) v.push_back(static_cast<float>(j) * m);
  }
  return F32(v, {n, 4, 2});
}

// ---------------------------------------------------------------------------------------------
// mm / matmul, 2-D

TEST(Linalg, Mm) {
  BeforeAndAfterStep([] { return lazyx::mm(A(), B()); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{2, 2}));
                       EXPECT_DTYPE(r, kFloat32);
                       ExpectFloats(r, {58, 64, 139, 154});
                     });
  BeforeAndAfterStep([] { return B().mm(A()); },
                     [](const Tensor& r) {
                       // [[7*1+8*4, 7*2+8*5, 7*3+8*6], ...]
                       EXPECT_EQ(r.shape(), (Shape{3, 3}));
                       ExpectFloats(r, {39, 54, 69, 49, 68, 87, 59, 82, 105});
                     });
}

TEST(Linalg, Matmul2D) {
  BeforeAndAfterStep([] { return A().matmul(B()); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{2, 2}));
                       ExpectFloats(r, {58, 64, 139, 154});
                     });
  BeforeAndAfterStep([] { return lazyx::matmul(A(), B()); },
                     [](const Tensor& r) {
                       ExpectFloats(r, {58, 64, 139, 154});
                     });
}

TEST(Linalg, MatmulOfTransposedOperands) {
  // A^T A, with A^T a non-contiguous view.
  BeforeAndAfterStep([] { return A().t().matmul(A()); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{3, 3}));
                       ExpectFloats(r, {17, 22, 27, 22, 29, 36, 27, 36, 45});
                     });
  // A A^T = [[14, 32], [32, 77]].
  BeforeAndAfterStep([] { return lazyx::mm(A(), A().transpose(0, 1)); },
                     [](const Tensor& r) {
                       ExpectFloats(r, {14, 32, 32, 77});
                     });
  // Columns 0 and 2 of A (a strided slice) @ [[1],[1]] = [[4],[10]].
  BeforeAndAfterStep(
      [] {
        return A().slice(1, 0, 3, 2).mm(F32({1, 1}, {2, 1}));
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 1}));
        ExpectFloats(r, {4, 10});
      });
}

TEST(Linalg, MmIntegerAndDoubleAndHalf) {
  BeforeAndAfterStep(
      [] {
        return lazyx::mm(lazyx::tensor<int64_t>({1, 2, 3, 4}, {2, 2}),
                         lazyx::tensor<int64_t>({5, 6, 7, 8}, {2, 2}));
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kInt64);
        EXPECT_EQ(r.to_vector<int64_t>(), (std::vector<int64_t>{19, 22, 43, 50}));
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::mm(lazyx::tensor<double>({0.1, 0.2}, {1, 2}),
                         lazyx::tensor<double>({10, 20}, {2, 1}));
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat64);
        EXPECT_NEAR(r.item<double>(), 5.0, 1e-14);
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::mm(F32({1, 2}, {1, 2}).to(kFloat16), F32({3, 4}, {2, 1}).to(kFloat16));
      },
      [](const Tensor& r) {
        EXPECT_DTYPE(r, kFloat16);
        EXPECT_EQ(r.shape(), (Shape{1, 1}));
        EXPECT_EQ(r.item<float>(), 11.0f);
      });
}

// ---------------------------------------------------------------------------------------------
// matmul with 1-D operands

TEST(Linalg, MatmulVectorVectorIsZeroDim) {
  BeforeAndAfterStep(
      [] {
        return F32({1, 2, 3}, {3}).matmul(F32({4, 5, 6}, {3}));
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{}));
        EXPECT_FLOAT_EQ(r.item<float>(), 32);
      });
}

TEST(Linalg, MatmulVectorMatrix) {
  // [3] @ [3,2]: the vector is a row, the result drops that dim.
  BeforeAndAfterStep(
      [] {
        return F32({1, 2, 3}, {3}).matmul(B());
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2}));
        ExpectFloats(r, {58, 64});
      });
  BeforeAndAfterStep(
      [] {
        return F32({1, 0, -1}, {3}).matmul(B());
      },
      [](const Tensor& r) {
        ExpectFloats(r, {-4, -4});
      });
}

TEST(Linalg, MatmulMatrixVector) {
  BeforeAndAfterStep(
      [] {
        return A().matmul(F32({1, 0, -1}, {3}));
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2}));
        ExpectFloats(r, {-2, -2});
      });
  BeforeAndAfterStep(
      [] {
        return A().matmul(F32({1, 2, 3}, {3}));
      },
      [](const Tensor& r) {
        ExpectFloats(r, {14, 32});
      });
}

TEST(Linalg, MatmulVectorBatch) {
  // [4] @ [2,4,2] -> [2,2]: [1,2,3,4] @ M = [1, 3 + 8] = [1, 11], times (j + 1).
  BeforeAndAfterStep(
      [] {
        return F32({1, 2, 3, 4}, {4}).matmul(ScaledM(2));
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 2}));
        ExpectFloats(r, {1, 11, 2, 22});
      });
}

TEST(Linalg, MatmulBatchVector) {
  // [2,3,4] @ [4] -> [2,3]: each row r gives r0 + r1 = 2 (12 i + 4 j) + 1.
  BeforeAndAfterStep(
      [] {
        return Iota(24, {2, 3, 4}).matmul(F32({1, 1, 0, 0}, {4}));
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 3}));
        ExpectFloats(r, {1, 9, 17, 25, 33, 41});
      });
}

// ---------------------------------------------------------------------------------------------
// Batched matmul

TEST(Linalg, MatmulMatrixBatch) {
  // [3,4] @ [2,4,2] -> [2,3,2]: row r of iota(12) is [4r, 4r+1, 4r+2, 4r+3], so row @ M is
  // [4r, 12r + 8], times (j + 1).
  BeforeAndAfterStep(
      [] {
        return Iota(12, {3, 4}).matmul(ScaledM(2));
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 3, 2}));
        ExpectFloats(r, {0, 8, 4, 20, 8, 32, 0, 16, 8, 40, 16, 64});
      });
}

TEST(Linalg, MatmulBatchBroadcasting) {
  // [2,1,3,4] @ [5,4,2] -> [2,5,3,2]. Row r of batch i of a is 12 i + 4 r + [0,1,2,3], so
  // out[i][j][r] = (j + 1) * [12 i + 4 r, 36 i + 12 r + 8].
  // clang-format off
  const std::vector<float> want = {
      // i = 0
      0, 8, 4, 20, 8, 32,         // j = 0
      0, 16, 8, 40, 16, 64,       // j = 1
      0, 24, 12, 60, 24, 96,      // j = 2
      0, 32, 16, 80, 32, 128,     // j = 3
      0, 40, 20, 100, 40, 160,    // j = 4
      // i = 1
      12, 44, 16, 56, 20, 68,     // j = 0
      24, 88, 32, 112, 40, 136,   // j = 1
      36, 132, 48, 168, 60, 204,  // j = 2
      48, 176, 64, 224, 80, 272,  // j = 3
      60, 220, 80, 280, 100, 340  // j = 4
  };
  // clang-format on
  BeforeAndAfterStep(
      [] {
        return Iota(24, {2, 1, 3, 4}).matmul(ScaledM(5));
      },
      [&](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 5, 3, 2}));
        EXPECT_DTYPE(r, kFloat32);
        ExpectFloats(r, want);
      });
}

TEST(Linalg, MatmulBatchBroadcastingSizeOneBatch) {
  // [1,3,4] @ [2,4,2] -> [2,3,2]: the size-1 batch of a broadcasts.
  BeforeAndAfterStep(
      [] {
        return Iota(12, {1, 3, 4}).matmul(ScaledM(2));
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 3, 2}));
        ExpectFloats(r, {0, 8, 4, 20, 8, 32, 0, 16, 8, 40, 16, 64});
      });
}

TEST(Linalg, Bmm) {
  // A0 = [[1,2],[3,4]], A1 = [[0,1],[1,0]]; B0 = [[1],[1]], B1 = [[2],[3]].
  auto a = [] { return F32({1, 2, 3, 4, 0, 1, 1, 0}, {2, 2, 2}); };
  auto b = [] { return F32({1, 1, 2, 3}, {2, 2, 1}); };
  BeforeAndAfterStep([&] { return lazyx::bmm(a(), b()); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{2, 2, 1}));
                       ExpectFloats(r, {3, 7, 3, 2});
                     });
  BeforeAndAfterStep([&] { return a().bmm(a()); },
                     [](const Tensor& r) {
                       // A0^2 = [[7,10],[15,22]], A1^2 = I.
                       EXPECT_EQ(r.shape(), (Shape{2, 2, 2}));
                       ExpectFloats(r, {7, 10, 15, 22, 1, 0, 0, 1});
                     });
}

// ---------------------------------------------------------------------------------------------
// addmm

TEST(Linalg, AddmmWithBetaAndAlpha) {
  // 0.5 * ones + 2 * (A @ B).
  BeforeAndAfterStep(
      [] {
        return lazyx::addmm(F32({1, 1, 1, 1}, {2, 2}), A(), B(), 0.5, 2);
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 2}));
        ExpectFloats(r, {116.5, 128.5, 278.5, 308.5});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::addmm(F32({1, 2, 3, 4}, {2, 2}), A(), B());
      },
      [](const Tensor& r) {
        ExpectFloats(r, {59, 66, 142, 158});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::addmm(F32({1, 2, 3, 4}, {2, 2}), A(), B(), 1, -1);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {-57, -62, -136, -150});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::addmm(F32({1, 2, 3, 4}, {2, 2}), A(), B(), 0, 1);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {58, 64, 139, 154});
      });
}

TEST(Linalg, AddmmBroadcastsTheBias) {
  // A bias row [2] (a linear layer) and a bias column [2,1].
  BeforeAndAfterStep(
      [] {
        return lazyx::addmm(F32({1, -1}, {2}), A(), B());
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 2}));
        ExpectFloats(r, {59, 63, 140, 153});
      });
  BeforeAndAfterStep(
      [] {
        return lazyx::addmm(F32({10, 20}, {2, 1}), A(), B(), 2, 1);
      },
      [](const Tensor& r) {
        ExpectFloats(r, {78, 84, 179, 194});
      });
}

TEST(Linalg, AlphaAndBetaShareOneProgram) {
  // beta and alpha are host scalars: a second pair of values must not recompile.
  Tensor bias = F32({1, 1, 1, 1}, {2, 2});
  Tensor a = A();
  Tensor b = B();
  Tensor r = lazyx::addmm(bias, a, b, 0.5, 2);
  lazyx::mark_step();
  ExpectFloats(r, {116.5, 128.5, 278.5, 308.5});
  int64_t before = lazyx::metrics::counter_value("UncachedCompile").value_or(0);
  r = lazyx::addmm(bias, a, b, 3, 0.5);
  lazyx::mark_step();
  ExpectFloats(r, {32, 35, 72.5, 80});
  EXPECT_EQ(lazyx::metrics::counter_value("UncachedCompile").value_or(0), before);
}

// ---------------------------------------------------------------------------------------------
// t / transpose

TEST(Linalg, T) {
  BeforeAndAfterStep([] { return A().t(); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{3, 2}));
                       EXPECT_EQ(r.strides(), (Shape{1, 3}));
                       EXPECT_FALSE(r.is_contiguous());
                       ExpectFloats(r, {1, 4, 2, 5, 3, 6});
                     });
  // t() of a 1-D or 0-d tensor is the tensor itself.
  BeforeAndAfterStep(
      [] {
        return F32({1, 2, 3}, {3}).t();
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{3}));
        ExpectFloats(r, {1, 2, 3});
      });
  BeforeAndAfterStep([] { return A().t().t(); },
                     [](const Tensor& r) {
                       EXPECT_EQ(r.shape(), (Shape{2, 3}));
                       EXPECT_EQ(r.strides(), (Shape{3, 1}));
                       ExpectFloats(r, {1, 2, 3, 4, 5, 6});
                     });
}

TEST(Linalg, TOfRank3Raises) {
  // torch: t() expects a tensor with <= 2 dimensions.
  EXPECT_THROW(Iota(24, {2, 3, 4}).t(), lazyx::Error);
}

TEST(Linalg, Transpose) {
  // [2,3,4] transpose(0,2) -> [4,3,2] with strides [1,4,12]: r[k][j][i] = 12 i + 4 j + k.
  BeforeAndAfterStep(
      [] {
        return Iota(24, {2, 3, 4}).transpose(0, 2);
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{4, 3, 2}));
        EXPECT_EQ(r.strides(), (Shape{1, 4, 12}));
        ExpectFloats(r, {0, 12, 4, 16, 8,  20, 1, 13, 5, 17, 9,  21,
                         2, 14, 6, 18, 10, 22, 3, 15, 7, 19, 11, 23});
      });
  BeforeAndAfterStep(
      [] {
        return Iota(24, {2, 3, 4}).transpose(-1, -2);
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 4, 3}));
        EXPECT_EQ(r.strides(), (Shape{12, 1, 4}));
        ExpectFloats(r, {0,  4,  8,  1,  5,  9,  2,  6,  10, 3,  7,  11,
                         12, 16, 20, 13, 17, 21, 14, 18, 22, 15, 19, 23});
      });
  BeforeAndAfterStep(
      [] {
        return Iota(6, {2, 3}).transpose(1, 1);
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{2, 3}));
        ExpectFloats(r, {0, 1, 2, 3, 4, 5});
      });
}

TEST(Linalg, BatchedMatmulOfTransposedBatch) {
  // bmm(x, x^T) per batch, with x^T from transpose(1,2): batch 0 is [[0,1],[2,3]], giving
  // [[1,3],[3,13]]; batch 1 is [[4,5],[6,7]], giving [[41,59],[59,85]].
  BeforeAndAfterStep(
      [] {
        Tensor x = Iota(8, {2, 2, 2});
        return x.bmm(x.transpose(1, 2));
      },
      [](const Tensor& r) {
        ExpectFloats(r, {1, 3, 3, 13, 41, 59, 59, 85});
      });
}

TEST(Linalg, MatmulAfterInPlaceUpdateOfInput) {
  Tensor a = A();
  Tensor b = B();
  Tensor before = a.mm(b);
  a.mul_(2);  // traced after `before`, so `before` must not see it
  Tensor after = a.mm(b);
  lazyx::mark_step();
  ExpectFloats(before, {58, 64, 139, 154});
  ExpectFloats(after, {116, 128, 278, 308});
  b.zero_();
  ExpectFloats(a.mm(b), {0, 0, 0, 0});
  ExpectFloats(before, {58, 64, 139, 154});
}

TEST(Linalg, ChainedMatmulsInOneStep) {
  // (A @ B) @ [[1],[-1]] = [[-6],[-15]].
  Tensor ab = A().matmul(B());
  Tensor r = ab.matmul(F32({1, -1}, {2, 1}));
  lazyx::mark_step();
  EXPECT_EQ(r.shape(), (Shape{2, 1}));
  ExpectFloats(r, {-6, -15});
  ExpectFloats(ab, {58, 64, 139, 154});
}

TEST(Linalg, ShapeMismatchesRaise) {
  EXPECT_THROW(lazyx::mm(A(), A()), lazyx::Error);                  // [2,3] @ [2,3]
  EXPECT_THROW(lazyx::mm(A(), F32({1, 2, 3}, {3})), lazyx::Error);  // mm needs 2-D
  EXPECT_THROW(lazyx::bmm(A(), B()), lazyx::Error);                 // bmm needs 3-D
  EXPECT_THROW(lazyx::bmm(Iota(8, {2, 2, 2}), Iota(12, {3, 2, 2})), lazyx::Error);
  EXPECT_THROW(A().matmul(F32({1, 2}, {2})), lazyx::Error);
  EXPECT_THROW(Iota(48, {2, 2, 3, 4}).matmul(Iota(24, {3, 4, 2})), lazyx::Error);  // 2 vs 3
  EXPECT_THROW(lazyx::addmm(F32({1, 2, 3}, {3}), A(), B()), lazyx::Error);         // bias [3]
  EXPECT_THROW(Iota(6, {2, 3}).transpose(0, 2), lazyx::Error);
}

TEST(Linalg, MixedDtypesRaise) {
  // torch.matmul does not promote: "expected scalar type Float but found Double".
  EXPECT_THROW(lazyx::mm(A(), B().to(kFloat64)), lazyx::Error);
  EXPECT_THROW(A().matmul(B().to(kInt64)), lazyx::Error);
}

TEST(Linalg, MatmulOfExpandedAndOffsetOperands) {
  // [[1],[2],[3]] expanded to [3,4] (stride 0) @ ones[4,1] = [[4],[8],[12]].
  BeforeAndAfterStep(
      [] {
        return F32({1, 2, 3}, {3, 1}).expand({3, 4}).matmul(F32({1, 1, 1, 1}, {4, 1}));
      },
      [](const Tensor& r) {
        EXPECT_EQ(r.shape(), (Shape{3, 1}));
        ExpectFloats(r, {4, 8, 12});
      });
  // Rows 1..2 of iota(12) as [3,4] (offset 4) @ [1,0,0,1]^T: 4r + (4r + 3) = [11, 19].
  BeforeAndAfterStep(
      [] {
        return Iota(12, {3, 4}).narrow(0, 1, 2).mm(F32({1, 0, 0, 1}, {4, 1}));
      },
      [](const Tensor& r) {
        ExpectFloats(r, {11, 19});
      });
  // A batch operand expanded along the batch dim: [2,2,2] of A0 twice @ [2,2,1].
  BeforeAndAfterStep(
      [] {
        return F32({1, 2, 3, 4}, {1, 2, 2}).expand({2, 2, 2}).bmm(F32({1, 1, 2, 3}, {2, 2, 1}));
      },
      [](const Tensor& r) {
        ExpectFloats(r, {3, 7, 8, 18});
      });
}

}  // namespace

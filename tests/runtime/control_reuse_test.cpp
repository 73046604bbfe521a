// If/Loop/Scan bodies set up once and reused across calls and iterations (frames and arena
// layouts counted), correct across changing inputs and shapes, bodies folding the enclosing
// graph's constants, the float32 LSTM against the general one, `profile` inside bodies, and
// silero VAD v5 (the LSTM-in-nested-If voice detector of issue 18) against ONNX Runtime.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>

#include "io/model_io.h"
#include "runtime/runtime.h"
#include "tests/common/models.h"
#include "tests/common/python_model.h"
#include "tests/runtime/ort_run.h"
#include "tests/runtime/tensors.h"

using namespace onnxforge;
namespace fs = std::filesystem;
using test::python_model;

namespace {

rt::Tensor floats(std::vector<int64_t> shape, uint32_t seed) {
  std::vector<float> v = test::randn(static_cast<size_t>(rt::numel(shape)), seed);
  return test::make<float>(DType::Float, std::move(shape), v);
}

double max_diff(const rt::Tensor& a, const rt::Tensor& b) {
  EXPECT_EQ(a.shape, b.shape);
  if (a.shape != b.shape) return INFINITY;
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::fabs(a.get_f64(i) - b.get_f64(i)));
  return m;
}

// If on c: then = relu(x) * k + sum over the last axis, else = x * x - k; x has a dynamic shape.
const char* kIfModel = R"PY(
then_g = h.make_graph([h.make_node('Relu', ['x'], ['r']), h.make_node('Mul', ['r', 'k'], ['rk']),
                       h.make_node('ReduceSum', ['x', 'ax'], ['s'], keepdims=1), h.make_node('Add', ['rk', 's'], ['t'])],
                      'then', [], [h.make_tensor_value_info('t', T.FLOAT, None)])
else_g = h.make_graph([h.make_node('Mul', ['x', 'x'], ['xx']), h.make_node('Sub', ['xx', 'k'], ['e'])],
                      'else', [], [h.make_tensor_value_info('e', T.FLOAT, None)])
g = h.make_graph([h.make_node('Tanh', ['x0'], ['x']),
                  h.make_node('If', ['c'], ['y'], name='If_0', then_branch=then_g, else_branch=else_g)], 'g',
                 [h.make_tensor_value_info('c', T.BOOL, []), h.make_tensor_value_info('x0', T.FLOAT, ['n', 'd'])],
                 [h.make_tensor_value_info('y', T.FLOAT, ['n', 'd'])],
                 [h.make_tensor('k', T.FLOAT, [], [3.0]), h.make_tensor('ax', T.INT64, [1], [-1])])
m = h.make_model(g, opset_imports=[h.make_opsetid('', 13)])
)PY";

std::vector<float> if_expected(bool c, const rt::Tensor& x0) {
  const int64_t d = x0.shape[1];
  std::vector<float> x(static_cast<size_t>(x0.numel())), y(x.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::tanh(x0.ptr<float>()[i]);
  for (size_t i = 0; i < x.size(); ++i) {
    if (!c) {
      y[i] = x[i] * x[i] - 3.f;
      continue;
    }
    const size_t row = i / static_cast<size_t>(d);
    float s = 0;
    for (int64_t j = 0; j < d; ++j) s += x[row * static_cast<size_t>(d) + static_cast<size_t>(j)];
    y[i] = std::max(x[i], 0.f) * 3.f + s;
  }
  return y;
}

}  // namespace

TEST(ControlReuse, IfBranchesSetUpOncePerShapeAndCorrectAcrossCallsAndShapes) {
  auto model = load_model(python_model("if_reuse", kIfModel));
  rt::Session s(*model);
  auto check = [&](bool c, const rt::Tensor& x0) {
    auto y = s.run({test::make<uint8_t>(DType::Bool, {}, {c}), x0});
    const auto want = if_expected(c, x0);
    ASSERT_EQ(y[0].shape, x0.shape);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(y[0].ptr<float>()[i], want[i], 1e-5) << i;
  };
  // Warm-up: one call of each branch with [2, 3].
  check(true, floats({2, 3}, 1));
  check(false, floats({2, 3}, 2));
  const auto warm = s.setup_counts();
  EXPECT_EQ(warm.body_frames, 2u);  // one per branch
  EXPECT_EQ(warm.layouts, 3u);      // main graph and both branches, for [2, 3]
  for (uint32_t i = 0; i < 20; ++i) check(i % 3 != 0, floats({2, 3}, 10 + i));
  EXPECT_EQ(s.setup_counts().body_frames, warm.body_frames) << "a body frame was made per call";
  EXPECT_EQ(s.setup_counts().layouts, warm.layouts) << "the same shapes were planned again";
  // A new shape is planned once (main graph and each branch run with it), then reused.
  check(true, floats({4, 5}, 40));
  check(false, floats({4, 5}, 41));
  EXPECT_EQ(s.setup_counts().layouts, warm.layouts + 3);
  for (uint32_t i = 0; i < 6; ++i) {
    check(i % 2 == 0, floats({4, 5}, 50 + i));
    check(i % 2 == 1, floats({2, 3}, 60 + i));
  }
  EXPECT_EQ(s.setup_counts().layouts, warm.layouts + 3);
  EXPECT_EQ(s.setup_counts().body_frames, warm.body_frames);
}

TEST(ControlReuse, LoopBodyReusedAcrossIterationsWithChangingTripCountsAndShapes) {
  // acc = acc * 0.5 + x_i where x_i = Gather(xs, i) (outer value), scan output acc * i.
  auto model = load_model(python_model("loop_reuse", R"PY(
body = h.make_graph(
  [h.make_node('Identity', ['cond_in'], ['cond_out']),
   h.make_node('Gather', ['xs', 'i'], ['xi'], axis=0),
   h.make_node('Mul', ['acc_in', 'half'], ['ah']),
   h.make_node('Add', ['ah', 'xi'], ['acc_out']),
   h.make_node('Cast', ['i'], ['i_f'], to=T.FLOAT),
   h.make_node('Mul', ['acc_out', 'i_f'], ['scan'])],
  'body',
  [h.make_tensor_value_info('i', T.INT64, []), h.make_tensor_value_info('cond_in', T.BOOL, []),
   h.make_tensor_value_info('acc_in', T.FLOAT, None)],
  [h.make_tensor_value_info('cond_out', T.BOOL, []), h.make_tensor_value_info('acc_out', T.FLOAT, None),
   h.make_tensor_value_info('scan', T.FLOAT, None)])
g = h.make_graph([h.make_node('Loop', ['M', '', 'a0'], ['acc', 'scans'], body=body)], 'g',
                 [h.make_tensor_value_info('M', T.INT64, []), h.make_tensor_value_info('a0', T.FLOAT, ['d']),
                  h.make_tensor_value_info('xs', T.FLOAT, ['t', 'd'])],
                 [h.make_tensor_value_info('acc', T.FLOAT, ['d']), h.make_tensor_value_info('scans', T.FLOAT, [None, 'd'])],
                 [h.make_tensor('half', T.FLOAT, [], [0.5])])
m = h.make_model(g, opset_imports=[h.make_opsetid('', 13)])
)PY"));
  rt::Session s(*model);
  auto check = [&](int64_t M, int64_t d, uint32_t seed) {
    rt::Tensor a0 = floats({d}, seed), xs = floats({M, d}, seed + 1);
    auto o = s.run({test::make<int64_t>(DType::Int64, {}, {M}), a0, xs});
    std::vector<float> acc(a0.ptr<float>(), a0.ptr<float>() + d);
    ASSERT_EQ(o[1].shape, (rt::Shape{M, d}));
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < d; ++j) {
        auto u = static_cast<size_t>(j);
        acc[u] = acc[u] * 0.5f + xs.ptr<float>()[i * d + j];
        EXPECT_NEAR(o[1].ptr<float>()[i * d + j], acc[u] * static_cast<float>(i), 1e-4) << i << "," << j;
      }
    for (int64_t j = 0; j < d; ++j) EXPECT_NEAR(o[0].ptr<float>()[j], acc[static_cast<size_t>(j)], 1e-5);
  };
  check(50, 8, 1);
  const auto warm = s.setup_counts();
  EXPECT_EQ(warm.body_frames, 1u) << "one frame for 50 iterations";
  EXPECT_EQ(warm.layouts, 2u);  // main graph, body (the body's input shapes stay the same)
  // New shapes of xs (the body reads it from the main graph, so its layout is keyed on it too)
  // are planned once each, in the main graph and in the body; shapes seen before are not.
  check(7, 8, 3);
  check(50, 8, 5);
  check(30, 16, 7);
  check(30, 16, 9);
  check(50, 8, 11);
  EXPECT_EQ(s.setup_counts().body_frames, 1u);
  EXPECT_EQ(s.setup_counts().layouts, warm.layouts + 4);
}

TEST(ControlReuse, ScanAndNestedIfInLoopStayCorrectWithFramesReused) {
  // Loop over i: if i is even acc += x else acc -= x * 2 (an If inside the body reading the
  // body's value and the main graph's); Scan doubling a running sum over the rows of y.
  auto model = load_model(python_model("nested", R"PY(
then_g = h.make_graph([h.make_node('Add', ['acc_in', 'x'], ['t'])], 'then', [], [h.make_tensor_value_info('t', T.FLOAT, None)])
else_g = h.make_graph([h.make_node('Mul', ['x', 'two'], ['x2']), h.make_node('Sub', ['acc_in', 'x2'], ['e'])],
                      'else', [], [h.make_tensor_value_info('e', T.FLOAT, None)])
body = h.make_graph(
  [h.make_node('Identity', ['cond_in'], ['cond_out']),
   h.make_node('Mod', ['i', 'two_i'], ['r']), h.make_node('Equal', ['r', 'zero_i'], ['even']),
   h.make_node('If', ['even'], ['acc_out'], then_branch=then_g, else_branch=else_g)],
  'body',
  [h.make_tensor_value_info('i', T.INT64, []), h.make_tensor_value_info('cond_in', T.BOOL, []),
   h.make_tensor_value_info('acc_in', T.FLOAT, None)],
  [h.make_tensor_value_info('cond_out', T.BOOL, []), h.make_tensor_value_info('acc_out', T.FLOAT, None)])
sbody = h.make_graph([h.make_node('Add', ['s_in', 'row'], ['s_sum']), h.make_node('Mul', ['s_sum', 'two'], ['s_out']),
                      h.make_node('Identity', ['s_out'], ['s_scan'])], 'sbody',
  [h.make_tensor_value_info('s_in', T.FLOAT, None), h.make_tensor_value_info('row', T.FLOAT, None)],
  [h.make_tensor_value_info('s_out', T.FLOAT, None), h.make_tensor_value_info('s_scan', T.FLOAT, None)])
g = h.make_graph([h.make_node('Loop', ['M', '', 'a0'], ['acc'], body=body),
                  h.make_node('Scan', ['s0', 'y'], ['s_last', 's_all'], body=sbody, num_scan_inputs=1)], 'g',
                 [h.make_tensor_value_info('M', T.INT64, []), h.make_tensor_value_info('a0', T.FLOAT, ['d']),
                  h.make_tensor_value_info('x', T.FLOAT, ['d']), h.make_tensor_value_info('s0', T.FLOAT, ['e']),
                  h.make_tensor_value_info('y', T.FLOAT, ['t', 'e'])],
                 [h.make_tensor_value_info('acc', T.FLOAT, ['d']), h.make_tensor_value_info('s_last', T.FLOAT, ['e']),
                  h.make_tensor_value_info('s_all', T.FLOAT, ['t', 'e'])],
                 [h.make_tensor('two', T.FLOAT, [], [2.0]), h.make_tensor('two_i', T.INT64, [], [2]),
                  h.make_tensor('zero_i', T.INT64, [], [0])])
m = h.make_model(g, opset_imports=[h.make_opsetid('', 16)])
)PY"));
  rt::Session s(*model);
  auto check = [&](int64_t M, int64_t d, int64_t T, int64_t e, uint32_t seed) {
    rt::Tensor a0 = floats({d}, seed), x = floats({d}, seed + 1), s0 = floats({e}, seed + 2),
               y = floats({T, e}, seed + 3);
    auto o = s.run({test::make<int64_t>(DType::Int64, {}, {M}), a0, x, s0, y});
    for (int64_t j = 0; j < d; ++j) {
      float acc = a0.ptr<float>()[j];
      for (int64_t i = 0; i < M; ++i) acc = i % 2 == 0 ? acc + x.ptr<float>()[j] : acc - x.ptr<float>()[j] * 2;
      EXPECT_NEAR(o[0].ptr<float>()[j], acc, 1e-4);
    }
    ASSERT_EQ(o[2].shape, (rt::Shape{T, e}));
    for (int64_t j = 0; j < e; ++j) {
      float sum = s0.ptr<float>()[j];
      for (int64_t t = 0; t < T; ++t) {
        sum = (sum + y.ptr<float>()[t * e + j]) * 2;
        EXPECT_NEAR(o[2].ptr<float>()[t * e + j], sum, 1e-3 * std::max(1.f, std::fabs(sum)));
      }
      EXPECT_NEAR(o[1].ptr<float>()[j], sum, 1e-3 * std::max(1.f, std::fabs(sum)));
    }
  };
  check(9, 4, 6, 3, 1);
  const size_t frames = s.setup_counts().body_frames;
  EXPECT_EQ(frames, 4u);  // Loop body, its If's two branches, Scan body
  for (uint32_t k = 0; k < 5; ++k) check(3 + k, k % 2 ? 4 : 6, 2 + k, k % 2 ? 3 : 5, 10 + k);
  EXPECT_EQ(s.setup_counts().body_frames, frames);
}

TEST(ControlReuse, BodiesFoldOuterConstantsLikeTheUnfoldedPlan) {
  // The body slices and concatenates an outer weight (as silero VAD does with its LSTM's): with
  // plan-time folding the body reads the folded result, without it computes it per call.
  auto model = load_model(python_model("outer_fold", R"PY(
W = np.arange(24, dtype=np.float32).reshape(4, 6) / 10
then_g = h.make_graph([h.make_node('Slice', ['W', 's0', 's1', 'ax'], ['a']), h.make_node('Slice', ['W', 's1', 's2', 'ax'], ['b']),
                       h.make_node('Concat', ['b', 'a'], ['wc'], axis=1), h.make_node('MatMul', ['x', 'wc'], ['t'])],
                      'then', [], [h.make_tensor_value_info('t', T.FLOAT, None)])
else_g = h.make_graph([h.make_node('MatMul', ['x', 'W'], ['e'])], 'else', [], [h.make_tensor_value_info('e', T.FLOAT, None)])
g = h.make_graph([h.make_node('If', ['c'], ['y'], then_branch=then_g, else_branch=else_g)], 'g',
                 [h.make_tensor_value_info('c', T.BOOL, []), h.make_tensor_value_info('x', T.FLOAT, [2, 4])],
                 [h.make_tensor_value_info('y', T.FLOAT, [2, 6])],
                 [nh.from_array(W, 'W'), h.make_tensor('s0', T.INT64, [1], [0]), h.make_tensor('s1', T.INT64, [1], [2]),
                  h.make_tensor('s2', T.INT64, [1], [6]), h.make_tensor('ax', T.INT64, [1], [1])])
m = h.make_model(g, opset_imports=[h.make_opsetid('', 13)])
)PY"));
  rt::SessionOptions plain;
  plain.fold_constants = false;
  rt::Session folded(*model), unfolded(*model, plain);
  for (uint32_t i = 0; i < 4; ++i) {
    std::vector<rt::Tensor> in{test::make<uint8_t>(DType::Bool, {}, {i % 2 == 0}), floats({2, 4}, i)};
    auto a = folded.run(in), b = unfolded.run(in);
    EXPECT_LT(max_diff(a[0], b[0]), 1e-6);
    // Column j of the then-branch's weight is column (j + 2) % 6 of W.
    if (i % 2 == 0)
      for (int64_t r = 0; r < 2; ++r)
        for (int64_t j = 0; j < 6; ++j) {
          double want = 0;
          for (int64_t k = 0; k < 4; ++k) want += in[1].ptr<float>()[r * 4 + k] * (k * 6 + (j + 2) % 6) / 10.0;
          EXPECT_NEAR(a[0].ptr<float>()[r * 6 + j], want, 1e-4);
        }
  }
}

TEST(ControlReuse, Float32LstmMatchesTheGeneralPath) {
  // The same LSTM with W/R/B as initializers (packed: the float32 path) and as graph inputs (the
  // float64 element-by-element path), every feature the fast path handles.
  for (const char* variant : {"direction='forward'", "direction='reverse', layout=1",
                              "direction='bidirectional', clip=0.7", "direction='forward', input_forget=1"}) {
    SCOPED_TRACE(variant);
    const std::string py = std::string(R"PY(
D = 2 if 'bidirectional' in ")PY") +
                           variant + R"PY(" else 1
layout1 = 'layout=1' in ")PY" +
                           variant + R"PY("
S, N, I, H = 5, 3, 7, 6
rng = np.random.default_rng(0)
W = (rng.standard_normal((D, 4 * H, I)) * 0.5).astype(np.float32)
R = (rng.standard_normal((D, 4 * H, H)) * 0.5).astype(np.float32)
B = (rng.standard_normal((D, 8 * H)) * 0.5).astype(np.float32)
P = (rng.standard_normal((D, 3 * H)) * 0.5).astype(np.float32)
xs = [N, S, I] if layout1 else [S, N, I]
ss = [N, D, H] if layout1 else [D, N, H]
ys = [N, S, D, H] if layout1 else [S, D, N, H]
def graph(consts):
    ins = [h.make_tensor_value_info('X', T.FLOAT, xs), h.make_tensor_value_info('h0', T.FLOAT, ss),
           h.make_tensor_value_info('c0', T.FLOAT, ss)]
    inits = [nh.from_array(P, 'P')]
    for name, arr in (('W', W), ('R', R), ('B', B)):
        if consts: inits.append(nh.from_array(arr, name))
        else: ins.append(h.make_tensor_value_info(name, T.FLOAT, list(arr.shape)))
    node = h.make_node('LSTM', ['X', 'W', 'R', 'B', '', 'h0', 'c0', 'P'], ['Y', 'Yh', 'Yc'], hidden_size=H, )PY" +
                           variant + R"PY()
    return h.make_graph([node], 'g', ins, [h.make_tensor_value_info('Y', T.FLOAT, ys), h.make_tensor_value_info('Yh', T.FLOAT, ss),
                                           h.make_tensor_value_info('Yc', T.FLOAT, ss)], inits)
onnx.save(h.make_model(graph(False), opset_imports=[h.make_opsetid('', 14)]), __file__.replace('make.py', 'general.onnx'))
np.save(__file__.replace('make.py', 'W.npy'), W); np.save(__file__.replace('make.py', 'R.npy'), R); np.save(__file__.replace('make.py', 'B.npy'), B)
m = h.make_model(graph(True), opset_imports=[h.make_opsetid('', 14)])
)PY";
    const fs::path fast_path = python_model("lstm", py);
    const fs::path dir = fast_path.parent_path();
    auto fast = load_model(fast_path);
    auto general = load_model(dir / "general.onnx");
    rt::Session sf(*fast), sg(*general);
    const bool layout1 = std::string(variant).find("layout=1") != std::string::npos;
    const int64_t D = std::string(variant).find("bidirectional") != std::string::npos ? 2 : 1, S = 5, N = 3, I = 7,
                  H = 6;
    rt::Tensor X = floats(layout1 ? rt::Shape{N, S, I} : rt::Shape{S, N, I}, 1);
    rt::Tensor h0 = floats(layout1 ? rt::Shape{N, D, H} : rt::Shape{D, N, H}, 2);
    rt::Tensor c0 = floats(layout1 ? rt::Shape{N, D, H} : rt::Shape{D, N, H}, 3);
    auto a = sf.run({X, h0, c0});
    auto b = sg.run({X, h0, c0, rt::read_npy(dir / "W.npy"), rt::read_npy(dir / "R.npy"), rt::read_npy(dir / "B.npy")});
    ASSERT_EQ(a.size(), 3u);
    for (size_t i = 0; i < 3; ++i) EXPECT_LT(max_diff(a[i], b[i]), 2e-5) << "output " << i;
  }
}

TEST(ControlReuse, ProfileAttributesTimeToBodyNodesWithTheirPath) {
  auto model = load_model(python_model("if_profile", kIfModel));
  rt::SessionOptions o;
  o.profile = true;
  rt::Session s(*model, o);
  for (int i = 0; i < 5; ++i)
    s.run({test::make<uint8_t>(DType::Bool, {}, {1}), floats({64, 256}, static_cast<uint32_t>(i))});
  bool relu = false, reduce = false, else_listed = false;
  double body_ms = 0, if_ms = -1;
  for (const rt::StepProfile& p : s.step_profile()) {
    if (p.path.rfind("If_0/then_branch/", 0) == 0) {
      EXPECT_EQ(p.depth, 1) << p.path;
      EXPECT_NE(p.node.find(p.path), std::string::npos) << p.node;
      body_ms += p.ms;
      relu = relu || p.op == "Relu";
      reduce = reduce || p.op == "ReduceSum";
    }
    if (p.path.rfind("If_0/else_branch/", 0) == 0) {
      else_listed = true;
      EXPECT_EQ(p.ms, 0.0) << "the else branch never ran: " << p.path;
    }
    if (p.path == "If_0") {
      EXPECT_EQ(p.depth, 0);
      if_ms = p.ms;
    }
  }
  EXPECT_TRUE(relu && reduce) << "the then-branch's nodes are listed";
  EXPECT_TRUE(else_listed);
  EXPECT_GT(body_ms, 0.0);
  EXPECT_GE(if_ms, 0.0);
  // The per-op table lists the body's ops; the If counts only its own time.
  bool sum_listed = false;
  for (const rt::OpProfile& p : s.profile()) sum_listed = sum_listed || p.op == "ReduceSum";
  EXPECT_TRUE(sum_listed);
}

TEST(ControlReuse, SileroVadAgreesWithOrtAcrossCalls) {
  // tools/models/fetch_real_models.sh puts it in .cache/real_models (of the main checkout: the
  // zoo's sibling folder).
  std::vector<fs::path> where;
  if (const char* env = std::getenv("ONNXFORGE_REAL_MODELS")) where.emplace_back(env);
  where.push_back(fs::path(ONNXFORGE_SOURCE_DIR) / ".cache/real_models");
  where.push_back(test::model_dir().parent_path() / "real_models");
  fs::path path;
  for (const fs::path& d : where)
    if (path.empty() && fs::exists(d / "silero_vad_v5.onnx")) path = d / "silero_vad_v5.onnx";
  if (path.empty()) GTEST_SKIP() << "silero_vad_v5.onnx not fetched (tools/models/fetch_real_models.sh)";
  if (!test::ort_peer_installed()) GTEST_SKIP() << "ONNX Runtime peer missing: tools/peers/install.sh";
  auto model = load_model(path);
  rt::Session s(*model);
  ASSERT_EQ(s.input_names(), (std::vector<std::string>{"input", "state", "sr"}));
  // A stream of frames as the VAD sees them: the state carried from call to call.
  const fs::path copy = test::temp_dir("silero") / "silero_vad_v5.onnx";
  fs::copy_file(path, copy);
  rt::Tensor state = test::make<float>(DType::Float, {2, 1, 128}, std::vector<float>(256, 0.f));
  rt::Tensor sr = test::make<int64_t>(DType::Int64, {}, {16000});
  size_t frames = 0;
  for (uint32_t call = 0; call < 3; ++call) {
    rt::Tensor x = floats({1, 512}, 100 + call);
    for (int64_t i = 0; i < 512; ++i) x.ptr<float>()[i] *= 0.1f * static_cast<float>(call + 1);
    auto ours = s.run({x, state, sr});
    std::string error;
    auto ort = test::ort_run(copy, {{"input", x}, {"state", state}, {"sr", sr}}, &error);
    ASSERT_TRUE(error.empty()) << error;
    ASSERT_EQ(ours.size(), 2u);
    EXPECT_LT(max_diff(ours[0], ort.at("output")), 1e-5) << "call " << call;
    EXPECT_LT(max_diff(ours[1], ort.at("stateN")), 1e-5) << "call " << call;
    state = ours[1];
    if (call == 0) frames = s.setup_counts().body_frames;
  }
  EXPECT_GT(frames, 0u);
  EXPECT_EQ(s.setup_counts().body_frames, frames) << "silero's nested bodies got new frames after the first call";
}

// The standard transformer ops: Attention-23 and Swish-24 against scalar float64 references
// written here from the spec, RotaryEmbedding/RMSNormalization/LayerNormalization/Gelu against
// their definitions, and all of them against ONNX Runtime 1.30 on built models.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "analysis/shapes.h"
#include "io/model_io.h"
#include "runtime/runtime.h"
#include "simd/isa.h"
#include "tests/common/models.h"
#include "tests/runtime/tensors.h"
#include "tests/runtime/ort_run.h"

using namespace onnxforge;
using namespace onnxforge::test;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// max |a - b| <= atol + rtol |b| elementwise (NaN never matches); reports the first miss.
::testing::AssertionResult near(const std::vector<double>& want, const rt::Tensor& got, double atol = 2e-5,
                                double rtol = 2e-4) {
  if (static_cast<int64_t>(want.size()) != got.numel())
    return ::testing::AssertionFailure() << "size " << got.numel() << " vs " << want.size();
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = got.get_f64(static_cast<int64_t>(i)), w = want[i];
    if (std::isinf(w) && g == w) continue;
    if (!(std::fabs(g - w) <= atol + rtol * std::fabs(w)))
      return ::testing::AssertionFailure() << "element " << i << ": got " << g << ", want " << w;
  }
  return ::testing::AssertionSuccess();
}

// ------------------------------------------------------------------ Attention reference

struct AttnCase {
  bool three_d = false;
  int64_t B = 2, Hq = 4, Hkv = 4, Sq = 5, Skv = 5, P = 0, D = 8, Dv = 6;
  bool causal = false;
  float scale = 0;  // 0: default 1/sqrt(D)
  float softcap = 0;
  int mask = 0;                     // 0 none, 1 bool, 2 float
  std::vector<int64_t> mask_shape;  // right-aligned broadcast to (B, Hq, Sq, T), last dim <= T
  int dead_row = -1;                // query row whose mask is all false / -inf (for every b, h)
  int qk_mode = -1;                 // -1: no qk_matmul_output
  bool nonpad = false;              // Attention-24 nonpad_kv_seqlen: batch b has T - 1 - b valid keys
  int64_t pad_keys = 0;             // mask: batch 1's first pad_keys keys are masked for every row (left padding)
  bool lowest = false;              // float mask: masked keys get the lowest float, not -inf (HF's finfo.min)
  int64_t valid(int64_t b) const { return T() - 1 - b; }
  std::string str() const {
    std::string s = (three_d ? "3d" : "4d") + std::string(" Hq") + std::to_string(Hq) + " Hkv" + std::to_string(Hkv) +
                    " Sq" + std::to_string(Sq) + " Skv" + std::to_string(Skv) + " P" + std::to_string(P) +
                    (causal ? " causal" : "") + " scale" + std::to_string(scale) + " softcap" +
                    std::to_string(softcap) + " mask" + std::to_string(mask) + "[";
    for (int64_t d : mask_shape) s += std::to_string(d) + ",";
    return s + "] dead" + std::to_string(dead_row) + " qk" + std::to_string(qk_mode) + (nonpad ? " nonpad" : "") +
           " D" + std::to_string(D) + " Dv" + std::to_string(Dv) + " pad" + std::to_string(pad_keys) +
           (lowest ? " lowest" : "");
  }
  int64_t T() const { return P + Skv; }
};

struct AttnData {
  std::vector<float> q, k, v, pk, pv, maskf;
  std::vector<uint8_t> maskb;
};

AttnData make_data(const AttnCase& c, uint32_t seed) {
  AttnData d;
  d.q = randn(static_cast<size_t>(c.B * c.Hq * c.Sq * c.D), seed, 1.5f);
  d.k = randn(static_cast<size_t>(c.B * c.Hkv * c.Skv * c.D), seed + 1, 1.5f);
  d.v = randn(static_cast<size_t>(c.B * c.Hkv * c.Skv * c.Dv), seed + 2);
  if (c.P) {
    d.pk = randn(static_cast<size_t>(c.B * c.Hkv * c.P * c.D), seed + 3, 1.5f);
    d.pv = randn(static_cast<size_t>(c.B * c.Hkv * c.P * c.Dv), seed + 4);
  }
  if (c.mask) {
    const size_t n = static_cast<size_t>(numel(c.mask_shape));
    std::mt19937 gen(seed + 5);
    const int64_t last = c.mask_shape.back(),
                  rows = c.mask_shape.size() >= 2 ? c.mask_shape[c.mask_shape.size() - 2] : 1;
    d.maskb.resize(n);
    d.maskf.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const int64_t row = (static_cast<int64_t>(i) / last) % rows;
      // about a third masked, key 0 always visible except in the dead row
      bool keep = (gen() % 3 != 0) || i % static_cast<size_t>(last) == 0;
      if (row == c.dead_row) keep = false;
      // Left padding: the mask's batch dim is 1 (every batch) or B (batch 1 only).
      const int64_t batch = c.mask_shape.size() == 4 && c.mask_shape[0] == c.B
                                ? static_cast<int64_t>(i) / (numel(c.mask_shape) / c.B)
                                : 1;
      if (c.pad_keys && batch == 1 && static_cast<int64_t>(i % static_cast<size_t>(last)) < c.pad_keys) keep = false;
      d.maskb[i] = keep;
      const float off = c.lowest ? std::numeric_limits<float>::lowest() : -std::numeric_limits<float>::infinity();
      d.maskf[i] = keep ? static_cast<float>(gen() % 7) * 0.25f - 0.5f : off;
    }
  }
  return d;
}

struct AttnRef {
  std::vector<double> y, pk, pv, qk;
};

// The spec, element by element in float64 (4-D indexing; 3-D data is addressed as
// (b, s, h*D + d)).
AttnRef reference(const AttnCase& c, const AttnData& d) {
  const int64_t T = c.T(), group = c.Hq / c.Hkv;
  const double scale = c.scale ? c.scale : 1.0 / std::sqrt(static_cast<double>(c.D));
  auto qat = [&](int64_t b, int64_t h, int64_t s, int64_t e) {
    return static_cast<double>(c.three_d ? d.q[static_cast<size_t>(((b * c.Sq + s) * c.Hq + h) * c.D + e)]
                                         : d.q[static_cast<size_t>(((b * c.Hq + h) * c.Sq + s) * c.D + e)]);
  };
  auto kat = [&](int64_t b, int64_t h, int64_t j, int64_t e) {
    if (j < c.P) return static_cast<double>(d.pk[static_cast<size_t>(((b * c.Hkv + h) * c.P + j) * c.D + e)]);
    j -= c.P;
    return static_cast<double>(c.three_d ? d.k[static_cast<size_t>(((b * c.Skv + j) * c.Hkv + h) * c.D + e)]
                                         : d.k[static_cast<size_t>(((b * c.Hkv + h) * c.Skv + j) * c.D + e)]);
  };
  auto vat = [&](int64_t b, int64_t h, int64_t j, int64_t e) {
    if (j < c.P) return static_cast<double>(d.pv[static_cast<size_t>(((b * c.Hkv + h) * c.P + j) * c.Dv + e)]);
    j -= c.P;
    return static_cast<double>(c.three_d ? d.v[static_cast<size_t>(((b * c.Skv + j) * c.Hkv + h) * c.Dv + e)]
                                         : d.v[static_cast<size_t>(((b * c.Hkv + h) * c.Skv + j) * c.Dv + e)]);
  };
  // Mask element for (b, h, i, j), broadcast right-aligned; keys past its last dim are masked.
  auto bias = [&](int64_t b, int64_t h, int64_t i, int64_t j) -> double {
    double r = 0;
    if (c.mask) {
      std::vector<int64_t> s(4 - c.mask_shape.size(), 1);
      s.insert(s.end(), c.mask_shape.begin(), c.mask_shape.end());
      if (j >= s[3]) return -kInf;
      const int64_t idx = (((s[0] == 1 ? 0 : b) * s[1] + (s[1] == 1 ? 0 : h)) * s[2] + (s[2] == 1 ? 0 : i)) * s[3] + j;
      r = c.mask == 1 ? (d.maskb[static_cast<size_t>(idx)] ? 0 : -kInf) : d.maskf[static_cast<size_t>(idx)];
    }
    if (c.nonpad && j >= c.valid(b)) return -kInf;
    if (c.causal && j > i + (c.nonpad ? c.valid(b) - c.Sq : c.P)) r += -kInf;
    return r;
  };
  AttnRef out;
  out.y.assign(static_cast<size_t>(c.B * c.Hq * c.Sq * c.Dv), 0);
  out.qk.assign(static_cast<size_t>(c.B * c.Hq * c.Sq * T), 0);
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hkv; ++h)
      for (int64_t j = 0; j < T; ++j) {
        for (int64_t e = 0; e < c.D; ++e) out.pk.push_back(kat(b, h, j, e));
        for (int64_t e = 0; e < c.Dv; ++e) out.pv.push_back(vat(b, h, j, e));
      }
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hq; ++h)
      for (int64_t i = 0; i < c.Sq; ++i) {
        std::vector<double> s(static_cast<size_t>(T)), raw(s.size()), capped(s.size()), p(s.size());
        bool all_masked = true;
        for (int64_t j = 0; j < T; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < c.D; ++e) dot += qat(b, h, i, e) * kat(b, h / group, j, e);
          raw[static_cast<size_t>(j)] = dot * scale;
          double x = raw[static_cast<size_t>(j)];
          if (c.softcap > 0) x = c.softcap * std::tanh(x / c.softcap);
          capped[static_cast<size_t>(j)] = x;
          const double bj = bias(b, h, i, j);
          all_masked &= bj == -kInf;
          s[static_cast<size_t>(j)] = x + bj;
        }
        double mx = -kInf, sum = 0;
        for (double x : s) mx = std::max(mx, x);
        for (int64_t j = 0; j < T; ++j)
          sum += p[static_cast<size_t>(j)] = all_masked ? 0 : std::exp(s[static_cast<size_t>(j)] - mx);
        for (double& x : p) x = all_masked ? 0 : x / sum;
        const size_t qk0 = static_cast<size_t>(((b * c.Hq + h) * c.Sq + i) * T);
        const std::vector<double>& qk = c.qk_mode == 0 ? raw : c.qk_mode == 1 ? capped : c.qk_mode == 2 ? s : p;
        if (c.qk_mode >= 0) std::copy(qk.begin(), qk.end(), out.qk.begin() + static_cast<std::ptrdiff_t>(qk0));
        for (int64_t e = 0; e < c.Dv; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < T; ++j) acc += p[static_cast<size_t>(j)] * vat(b, h / group, j, e);
          const int64_t at =
              c.three_d ? ((b * c.Sq + i) * c.Hq + h) * c.Dv + e : ((b * c.Hq + h) * c.Sq + i) * c.Dv + e;
          out.y[static_cast<size_t>(at)] = acc;
        }
      }
  return out;
}

// A model with one Attention node over the case's inputs; returns the inputs to feed it.
std::vector<std::pair<std::string, rt::Tensor>> build(GraphBuilder& m, const AttnCase& c, const AttnData& d,
                                                      DType ft = DType::Float) {
  std::vector<std::pair<std::string, rt::Tensor>> feeds;
  auto tensor = [&](const std::vector<float>& v, std::vector<int64_t> shape) {
    if (ft == DType::Float) return test::make<float>(DType::Float, shape, v);
    return rt::cast(test::make<float>(DType::Float, shape, v), ft);
  };
  auto add = [&](const std::string& name, rt::Tensor t) {
    ValueId id = m.input(name, t.shape, t.dtype);
    feeds.emplace_back(name, std::move(t));
    return id;
  };
  std::vector<int64_t> qs =
      c.three_d ? std::vector<int64_t>{c.B, c.Sq, c.Hq * c.D} : std::vector<int64_t>{c.B, c.Hq, c.Sq, c.D};
  std::vector<int64_t> ks =
      c.three_d ? std::vector<int64_t>{c.B, c.Skv, c.Hkv * c.D} : std::vector<int64_t>{c.B, c.Hkv, c.Skv, c.D};
  std::vector<int64_t> vs =
      c.three_d ? std::vector<int64_t>{c.B, c.Skv, c.Hkv * c.Dv} : std::vector<int64_t>{c.B, c.Hkv, c.Skv, c.Dv};
  std::vector<ValueId> ins = {add("Q", tensor(d.q, qs)), add("K", tensor(d.k, ks)), add("V", tensor(d.v, vs))};
  if (c.mask == 1)
    ins.push_back(add("mask", test::make<uint8_t>(DType::Bool, c.mask_shape, d.maskb)));
  else if (c.mask == 2)
    ins.push_back(add("mask", tensor(d.maskf, c.mask_shape)));
  else if (c.P || c.nonpad)
    ins.push_back(ValueId{});
  if (c.P) {
    ins.push_back(add("past_key", tensor(d.pk, {c.B, c.Hkv, c.P, c.D})));
    ins.push_back(add("past_value", tensor(d.pv, {c.B, c.Hkv, c.P, c.Dv})));
  }
  if (c.nonpad) {
    ins.resize(6);
    std::vector<int64_t> lens;
    for (int64_t b = 0; b < c.B; ++b) lens.push_back(c.valid(b));
    ins.push_back(add("nonpad_kv_seqlen", test::make<int64_t>(DType::Int64, {c.B}, lens)));
  }
  std::vector<NewAttr> attrs;
  if (c.three_d) attrs = {NewAttr::Int("q_num_heads", c.Hq), NewAttr::Int("kv_num_heads", c.Hkv)};
  if (c.causal) attrs.push_back(NewAttr::Int("is_causal", 1));
  if (c.scale) attrs.push_back(NewAttr::Float("scale", c.scale));
  if (c.softcap) attrs.push_back(NewAttr::Float("softcap", c.softcap));
  if (c.qk_mode > 0) attrs.push_back(NewAttr::Int("qk_matmul_output_mode", c.qk_mode));
  const size_t n_out = c.qk_mode >= 0 ? 4 : c.P ? 3 : 1;
  m.outputs(m.node_n("Attention", ins, attrs, n_out));
  m.model().ir_version = c.nonpad ? 12 : 11;
  return feeds;
}

std::vector<rt::Tensor> run(const Model& m, const std::vector<std::pair<std::string, rt::Tensor>>& feeds) {
  rt::Session s(m);
  std::vector<rt::Tensor> ins;
  for (const auto& f : feeds) ins.push_back(f.second);
  auto first = s.run(ins);  // heap run, then the arena run must agree
  auto second = s.run(ins);
  for (size_t i = 0; i < first.size(); ++i)
    for (int64_t e = 0; e < first[i].numel(); ++e) {
      const double a = first[i].get_f64(e), b = second[i].get_f64(e);
      EXPECT_TRUE(a == b || (std::isnan(a) && std::isnan(b)))
          << "arena run differs at output " << i << " element " << e;
    }
  return first;
}

void check_case(const AttnCase& c, uint32_t seed) {
  SCOPED_TRACE(c.str());
  const AttnData d = make_data(c, seed);
  const AttnRef want = reference(c, d);
  GraphBuilder m(c.nonpad ? 24 : 23);
  auto feeds = build(m, c, d);
  auto got = run(m.model(), feeds);
  EXPECT_TRUE(near(want.y, got[0])) << "Y";
  if (got.size() > 2) {
    EXPECT_TRUE(near(want.pk, got[1], 0, 0)) << "present_key";
    EXPECT_TRUE(near(want.pv, got[2], 0, 0)) << "present_value";
  }
  if (c.qk_mode >= 0) {
    const std::vector<int64_t> qs{c.B, c.Hq, c.Sq, c.T()};
    EXPECT_EQ(got[3].shape, qs);
    EXPECT_TRUE(near(want.qk, got[3])) << "qk_matmul_output mode " << c.qk_mode;
  }
}

// Mask shapes broadcasting to (B, Hq, Sq, T).
std::vector<std::vector<int64_t>> mask_shapes(const AttnCase& c) {
  const int64_t T = c.T();
  return {{c.Sq, T}, {c.B, 1, 1, T}, {c.B, 1, c.Sq, T}, {c.B, c.Hq, c.Sq, T}, {1, c.Hq, 1, T}, {T}, {c.Hq, c.Sq, T}};
}

}  // namespace

// Every option combination against the float64 reference: layouts, MHA/GQA 2:1/4:1, causal with
// q_len < kv_len and with a past cache, bool and additive masks of every broadcast shape, scale,
// softcap, more than one 64-row score tile.
TEST(Attention23, MatchesScalarReference) {
  struct Seq {
    int64_t Sq, Skv, P;
  };
  const Seq seqs[] = {{5, 5, 0}, {3, 7, 0}, {2, 2, 4}, {1, 1, 6}, {70, 70, 0}};
  const std::pair<int64_t, int64_t> heads[] = {{4, 4}, {4, 2}, {4, 1}};
  const std::pair<float, float> scales[] = {{0.f, 0.f}, {0.3f, 0.f}, {0.5f, 2.f}};
  uint32_t seed = 1;
  int cases = 0;
  for (bool three_d : {false, true})
    for (auto [hq, hkv] : heads)
      for (const Seq& s : seqs)
        for (bool causal : {false, true})
          for (auto [scale, softcap] : scales)
            for (int mask = 0; mask <= 2; ++mask) {
              AttnCase c;
              c.three_d = three_d, c.Hq = hq, c.Hkv = hkv, c.Sq = s.Sq, c.Skv = s.Skv, c.P = s.P, c.causal = causal;
              c.scale = scale, c.softcap = softcap, c.mask = mask;
              if (s.Sq == 70 && (hq != hkv || scale != 0.f)) continue;  // the long case once per layout/mask
              if (mask == 0) {
                check_case(c, ++seed);
                ++cases;
                continue;
              }
              for (auto& shape : mask_shapes(c)) {
                c.mask_shape = shape;
                check_case(c, ++seed);
                ++cases;
              }
            }
  EXPECT_GT(cases, 1000);
}

// Few query rows (decode steps, short chunks) run split over key blocks with K and V read in
// place and partial softmax sums merged: past lengths 0, 1, 7 and 1023 (many blocks), odd head
// sizes, MHA and GQA 2:1 / 4:1 / 8:1, 3-D and 4-D, causal, bool and additive masks (finite
// lowest-float ones too), left padding that masks whole blocks, softcap; present exact.
TEST(Attention23, DecodeSplitOverKeyBlocks) {
  struct Shape3 {
    int64_t D, Dv;
  };
  const Shape3 sizes[] = {{64, 64}, {13, 7}, {17, 33}};
  const std::pair<int64_t, int64_t> heads[] = {{4, 4}, {4, 2}, {8, 2}, {8, 1}};
  uint32_t seed = 900;
  int cases = 0;
  // Every kernel level the CPU has (the long past at the best one only).
  const std::vector<simd::Isa> isas = simd::available_isas();
  const simd::Isa best = simd::active_isa_level();
  for (simd::Isa isa : isas) {
    ASSERT_TRUE(simd::set_isa(isa));
    SCOPED_TRACE(simd::isa_name(isa));
    for (int64_t P : {0, 1, 7, 1023})
      for (int64_t sq : {1, 3})
        for (auto [hq, hkv] : heads)
          for (const Shape3& sz : sizes)
            for (int variant = 0; variant < 4; ++variant) {
              AttnCase c;
              c.Hq = hq, c.Hkv = hkv, c.Sq = sq, c.Skv = sq, c.P = P, c.D = sz.D, c.Dv = sz.Dv;
              c.three_d = variant % 2 == 1;
              c.causal = variant >= 2;
              // The long past on the common shapes, at the best level.
              if (P == 1023 && (sz.D != 64 || variant == 1 || isa != best)) continue;
              if (variant == 1) c.softcap = 2.f;
              c.mask = variant == 0 ? 2 : variant == 2 ? 1 : 0;
              c.lowest = sq == 1 && variant == 0;
              if (c.mask) c.mask_shape = {c.B, 1, c.Sq, c.T()};
              if (c.mask && P >= 7) c.pad_keys = P * 3 / 4;  // batch 1 sees only its last quarter
              check_case(c, ++seed);
              ++cases;
            }
  }
  simd::set_isa(best);
  EXPECT_GT(cases, 200);
}

// qk_matmul_output in every mode, with softcap, a mask and causal masking all active.
TEST(Attention23, QkMatmulOutputModes) {
  for (int mode = 0; mode <= 3; ++mode)
    for (bool three_d : {false, true}) {
      AttnCase c;
      c.three_d = three_d, c.Hq = 4, c.Hkv = 2, c.Sq = 3, c.Skv = 3, c.P = 2, c.causal = true, c.softcap = 2.f;
      c.mask = 2, c.mask_shape = {c.B, 1, c.Sq, c.T()}, c.qk_mode = mode;
      check_case(c, 100 + static_cast<uint32_t>(mode));
    }
}

// A query row whose every key is masked gives zeros (Y and the mode-3 probabilities), never NaN;
// with a bool mask, a float -inf mask and a bool mask combined with causal masking.
TEST(Attention23, FullyMaskedRowsGiveZeros) {
  for (int mask = 1; mask <= 2; ++mask)
    for (bool causal : {false, true})
      for (bool three_d : {false, true}) {
        AttnCase c;
        c.three_d = three_d, c.causal = causal, c.mask = mask, c.Hkv = 2, c.mask_shape = {c.B, 1, c.Sq, c.T()};
        c.dead_row = 2, c.qk_mode = 3;
        check_case(c, 200);
        const AttnData d = make_data(c, 200);
        GraphBuilder m(23);
        auto got = run(m.model(), build(m, c, d));
        for (int64_t b = 0; b < c.B; ++b)
          for (int64_t h = 0; h < c.Hq; ++h)
            for (int64_t e = 0; e < c.Dv; ++e) {
              const int64_t at =
                  three_d ? ((b * c.Sq + 2) * c.Hq + h) * c.Dv + e : ((b * c.Hq + h) * c.Sq + 2) * c.Dv + e;
              EXPECT_EQ(got[0].get_f64(at), 0.0);
            }
      }
}

// Attention-24's nonpad_kv_seqlen: padding keys masked per batch, the causal frontier at
// valid_length - q_length (a row before it is fully masked and gives zeros).
TEST(Attention24, NonpadKvSeqlen) {
  for (bool causal : {false, true})
    for (bool three_d : {false, true})
      for (int64_t sq : {1, 4, 6}) {
        AttnCase c;
        c.three_d = three_d, c.causal = causal, c.nonpad = true, c.Hkv = 2, c.Sq = sq, c.Skv = 6, c.qk_mode = 3;
        check_case(c, 250 + static_cast<uint32_t>(sq));
        c.mask = 1, c.mask_shape = {c.B, 1, c.Sq, c.T()};
        check_case(c, 260 + static_cast<uint32_t>(sq));
      }
}

// A mask shorter than the total length masks the keys it does not cover (the reference pads it).
TEST(Attention23, ShortMaskMasksTheRest) {
  AttnCase c;
  c.P = 3, c.Sq = 2, c.Skv = 2, c.mask = 1, c.mask_shape = {c.B, 1, c.Sq, 4};
  check_case(c, 300);
  c.mask = 2;
  check_case(c, 301);
}

// A numeric mask of another type (the spec's U) is additive like a float one.
TEST(Attention23, IntegerMaskIsAdditive) {
  AttnCase c;
  c.mask = 2, c.mask_shape = {c.Sq, c.T()};
  AttnData d = make_data(c, 450);
  std::vector<int32_t> ints;
  for (float& v : d.maskf) {
    v = std::isinf(v) ? -100000.f : std::round(v * 4);
    ints.push_back(static_cast<int32_t>(v));
  }
  GraphBuilder mf(23), mi(23);
  auto ff = build(mf, c, d);
  auto fi = build(mi, c, d);
  fi.back().second = test::make<int32_t>(DType::Int32, c.mask_shape, ints);
  const ValueId mask = mi.g().graph_inputs().back();
  const std::vector<Dim> dims(mi.g().shape(mask).begin(), mi.g().shape(mask).end());
  mi.g().set_type(mask, DType::Int32, dims);
  auto want = run(mf.model(), ff), got = run(mi.model(), fi);
  std::vector<double> w;
  for (int64_t e = 0; e < want[0].numel(); ++e) w.push_back(want[0].get_f64(e));
  EXPECT_TRUE(near(w, got[0], 0, 0));
}

// float16 Q/K/V/caches: computed in float32, outputs in float16.
TEST(Attention23, Float16) {
  AttnCase c;
  c.Hkv = 2, c.P = 2, c.causal = true;
  const AttnData d = make_data(c, 400);
  // The reference sees the float16-rounded inputs.
  AttnData r = d;
  for (auto* v : {&r.q, &r.k, &r.v, &r.pk, &r.pv})
    for (float& x : *v) x = half_to_float(float_to_half(x));
  const AttnRef want = reference(c, r);
  GraphBuilder m(23);
  auto got = run(m.model(), build(m, c, d, DType::Float16));
  ASSERT_EQ(got[0].dtype, DType::Float16);
  EXPECT_TRUE(near(want.y, got[0], 2e-3, 2e-3));
  EXPECT_EQ(got[1].dtype, DType::Float16);
}

TEST(Attention23, BadInputsAreClearErrors) {
  auto expect_error = [](AttnCase c, const std::string& what, auto mutate) {
    const AttnData d = make_data(c, 500);
    GraphBuilder m(23);
    auto feeds = build(m, c, d);
    mutate(feeds);
    rt::Session s(m.model());
    std::vector<rt::Tensor> ins;
    for (auto& f : feeds) ins.push_back(f.second);
    try {
      s.run(ins);
      ADD_FAILURE() << "no error for " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("Attention"), std::string::npos) << e.what();
    }
  };
  AttnCase c;
  c.Hq = 3, c.Hkv = 2;
  expect_error(c, "not a multiple of kv_num_heads", [](auto&) {});
  AttnCase m;
  m.mask = 1, m.mask_shape = {m.B, 1, 3, m.T()};  // 3 query rows for 5 queries
  expect_error(m, "does not broadcast", [](auto&) {});
  AttnCase l;
  l.mask = 2, l.mask_shape = {l.T() + 1};
  expect_error(l, "exceeds the total sequence length", [](auto&) {});
}

// ------------------------------------------------------------------ Swish

TEST(Swish24, MatchesDefinition) {
  for (float alpha : {1.f, 0.5f, 1.702f}) {
    GraphBuilder m(24);
    ValueId x = m.input("x", {3, 1000}, DType::Float);
    std::vector<NewAttr> attrs;
    if (alpha != 1.f) attrs.push_back(NewAttr::Float("alpha", alpha));
    m.outputs({m.node("Swish", {x}, attrs)});
    std::vector<float> xv = randn(3000, 7, 4.f);
    xv[0] = -100.f, xv[1] = 100.f, xv[2] = 0.f;
    rt::Session s(m.model());
    auto y = s.run({test::make<float>(DType::Float, {3, 1000}, xv)});
    std::vector<double> want;
    for (float v : xv) want.push_back(v / (1 + std::exp(-static_cast<double>(alpha) * v)));
    EXPECT_TRUE(near(want, y[0], 1e-6, 1e-5)) << "alpha " << alpha;
  }
}

// ------------------------------------------------------------------ RotaryEmbedding

namespace {

struct RopeCase {
  bool three_d = false, interleaved = false, with_pos = true;
  int64_t B = 2, H = 3, S = 4, D = 8, rot = 0, max_pos = 16;
};

// The spec's rotation, in float64: x1/x2 from halves or even/odd lanes of the first `rot` dims.
std::vector<double> rope_reference(const RopeCase& c, const std::vector<float>& x, const std::vector<float>& cs,
                                   const std::vector<float>& sn, const std::vector<int64_t>& pos) {
  const int64_t rot = c.rot ? c.rot : c.D, half = rot / 2;
  std::vector<double> y(x.begin(), x.end());
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.H; ++h)
      for (int64_t s = 0; s < c.S; ++s) {
        const int64_t base = c.three_d ? (b * c.S + s) * c.H * c.D + h * c.D : ((b * c.H + h) * c.S + s) * c.D;
        const int64_t row = c.with_pos ? pos[static_cast<size_t>(b * c.S + s)] : b * c.S + s;
        for (int64_t i = 0; i < half; ++i) {
          const int64_t i1 = c.interleaved ? 2 * i : i, i2 = c.interleaved ? 2 * i + 1 : i + half;
          const double x1 = x[static_cast<size_t>(base + i1)], x2 = x[static_cast<size_t>(base + i2)];
          const double co = cs[static_cast<size_t>(row * half + i)], si = sn[static_cast<size_t>(row * half + i)];
          y[static_cast<size_t>(base + i1)] = co * x1 - si * x2;
          y[static_cast<size_t>(base + i2)] = si * x1 + co * x2;
        }
      }
  return y;
}

struct RopeModel {
  GraphBuilder m{23};
  std::vector<std::pair<std::string, rt::Tensor>> feeds;
  std::vector<float> x, cs, sn;
  std::vector<int64_t> pos;
};

void build_rope(RopeModel& r, const RopeCase& c, uint32_t seed) {
  const int64_t rot = c.rot ? c.rot : c.D, half = rot / 2;
  const std::vector<int64_t> xs =
      c.three_d ? std::vector<int64_t>{c.B, c.S, c.H * c.D} : std::vector<int64_t>{c.B, c.H, c.S, c.D};
  r.x = randn(static_cast<size_t>(numel(xs)), seed);
  const int64_t rows = c.with_pos ? c.max_pos : c.B * c.S;
  r.cs = randn(static_cast<size_t>(rows * half), seed + 1);
  r.sn = randn(static_cast<size_t>(rows * half), seed + 2);
  auto add = [&](const std::string& name, rt::Tensor t) {
    ValueId id = r.m.input(name, t.shape, t.dtype);
    r.feeds.emplace_back(name, std::move(t));
    return id;
  };
  std::vector<ValueId> ins = {add("x", test::make<float>(DType::Float, xs, r.x))};
  const std::vector<int64_t> cache_shape =
      c.with_pos ? std::vector<int64_t>{rows, half} : std::vector<int64_t>{c.B, c.S, half};
  ins.push_back(add("cos", test::make<float>(DType::Float, cache_shape, r.cs)));
  ins.push_back(add("sin", test::make<float>(DType::Float, cache_shape, r.sn)));
  if (c.with_pos) {
    std::mt19937 gen(seed + 3);
    for (int64_t i = 0; i < c.B * c.S; ++i)
      r.pos.push_back(static_cast<int64_t>(gen() % static_cast<uint32_t>(c.max_pos)));
    ins.push_back(add("pos", test::make<int64_t>(DType::Int64, {c.B, c.S}, r.pos)));
  }
  std::vector<NewAttr> attrs;
  if (c.three_d) attrs.push_back(NewAttr::Int("num_heads", c.H));
  if (c.interleaved) attrs.push_back(NewAttr::Int("interleaved", 1));
  if (c.rot) attrs.push_back(NewAttr::Int("rotary_embedding_dim", c.rot));
  r.m.outputs({r.m.node("RotaryEmbedding", ins, attrs)});
  r.m.model().ir_version = 11;
}

std::vector<RopeCase> rope_cases() {
  std::vector<RopeCase> out;
  for (bool three_d : {false, true})
    for (bool inter : {false, true})
      for (bool pos : {true, false})
        for (int64_t rot : {0, 4}) {
          RopeCase c;
          c.three_d = three_d, c.interleaved = inter, c.with_pos = pos, c.rot = rot;
          out.push_back(c);
        }
  return out;
}

}  // namespace

TEST(RotaryEmbedding23, MatchesReference) {
  uint32_t seed = 10;
  for (const RopeCase& c : rope_cases()) {
    RopeModel r;
    build_rope(r, c, seed += 5);
    auto y = run(r.m.model(), r.feeds);
    EXPECT_TRUE(near(rope_reference(c, r.x, r.cs, r.sn, r.pos), y[0], 1e-6, 1e-6))
        << "3d " << c.three_d << " interleaved " << c.interleaved << " pos " << c.with_pos << " rot " << c.rot;
  }
}

// Position ids outside the cache are an error naming the id, never a read past the cache.
TEST(RotaryEmbedding23, OutOfRangePositionIsAnError) {
  for (int64_t bad : {16, -1, 1000000}) {
    RopeModel r;
    build_rope(r, RopeCase{}, 3);
    r.feeds.back().second.ptr<int64_t>()[3] = bad;
    rt::Session s(r.m.model());
    std::vector<rt::Tensor> ins;
    for (auto& f : r.feeds) ins.push_back(f.second);
    try {
      s.run(ins);
      ADD_FAILURE() << "no error for position " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("position id " + std::to_string(bad)), std::string::npos) << e.what();
    }
  }
  // A full-width cache (the exporters' duplicated halves) is rejected, not half read.
  GraphBuilder m(23);
  ValueId x = m.input("x", {1, 1, 2, 8}, DType::Float);
  ValueId cs = m.init<float>("cos", {4, 8}, std::vector<float>(32, 1.f), DType::Float);
  ValueId pos = m.init<int64_t>("pos", {1, 2}, {0, 1}, DType::Int64);
  m.outputs({m.node("RotaryEmbedding", {x, cs, cs, pos})});
  rt::Session s(m.model());
  EXPECT_THROW(s.run({test::make<float>(DType::Float, {1, 1, 2, 8}, std::vector<float>(16, 1.f))}), Error);
}

// ------------------------------------------------------------------ norms

// RMSNormalization: Y takes the scale's type; stage one in float32 (stash_type 1); any axis.
TEST(RMSNormalization23, TypesAxesAndValues) {
  const std::vector<float> xv = randn(2 * 3 * 8, 21, 3.f), sv = randn(3 * 8, 22);
  for (int64_t axis : {-1, 1}) {
    const int64_t cols = axis == -1 ? 8 : 24;
    for (auto [xt, st] : {std::pair{DType::Float, DType::Float}, std::pair{DType::Float16, DType::Float},
                          std::pair{DType::Float, DType::Float16}, std::pair{DType::BFloat16, DType::BFloat16}}) {
      GraphBuilder m(23);
      ValueId x = m.input("x", {2, 3, 8}, xt);
      std::vector<float> scale(sv.begin(), sv.begin() + cols);
      ValueId s = m.input("scale", axis == -1 ? std::vector<int64_t>{8} : std::vector<int64_t>{3, 8}, st);
      m.outputs({m.node("RMSNormalization", {x, s}, {NewAttr::Int("axis", axis), NewAttr::Float("epsilon", 1e-3f)})});
      rt::Tensor xin = rt::cast(test::make<float>(DType::Float, {2, 3, 8}, xv), xt);
      rt::Tensor sin = rt::cast(
          test::make<float>(DType::Float, axis == -1 ? std::vector<int64_t>{8} : std::vector<int64_t>{3, 8}, scale),
          st);
      rt::Session sess(m.model());
      auto y = sess.run({xin, sin});
      EXPECT_EQ(y[0].dtype, st) << "Y takes the scale's type";
      std::vector<double> want;
      for (int64_t r = 0; r < 48 / cols; ++r) {
        double sq = 0;
        for (int64_t i = 0; i < cols; ++i) sq += std::pow(xin.get_f64(r * cols + i), 2);
        const double inv = 1 / std::sqrt(sq / static_cast<double>(cols) + 1e-3);
        for (int64_t i = 0; i < cols; ++i) want.push_back(xin.get_f64(r * cols + i) * inv * sin.get_f64(i));
      }
      const double tol = st == DType::Float ? 1e-5 : st == DType::Float16 ? 2e-3 : 1e-2;
      EXPECT_TRUE(near(want, y[0], tol, tol)) << dtype_name(xt) << " x, " << dtype_name(st) << " scale, axis " << axis;
    }
  }
}

// LayerNormalization: float16 X gives float16 Y but float32 Mean/InvStdDev (stash_type 1).
TEST(LayerNormalization17, Float16StatsAreFloat) {
  GraphBuilder m(17);
  ValueId x = m.input("x", {2, 8}, DType::Float16);
  ValueId s = m.input("s", {8}, DType::Float16);
  ValueId b = m.input("b", {8}, DType::Float16);
  auto outs = m.node_n("LayerNormalization", {x, s, b}, {}, 3);
  m.outputs(outs);
  const std::vector<float> xv = randn(16, 31, 2.f), sv = randn(8, 32), bv = randn(8, 33);
  rt::Tensor xin = rt::cast(test::make<float>(DType::Float, {2, 8}, xv), DType::Float16);
  rt::Tensor sin = rt::cast(test::make<float>(DType::Float, {8}, sv), DType::Float16);
  rt::Tensor bin = rt::cast(test::make<float>(DType::Float, {8}, bv), DType::Float16);
  rt::Session sess(m.model());
  auto y = sess.run({xin, sin, bin});
  EXPECT_EQ(y[0].dtype, DType::Float16);
  EXPECT_EQ(y[1].dtype, DType::Float);
  EXPECT_EQ(y[2].dtype, DType::Float);
  std::vector<double> want, mean, inv;
  for (int64_t r = 0; r < 2; ++r) {
    double mu = 0, var = 0;
    for (int64_t i = 0; i < 8; ++i) mu += xin.get_f64(r * 8 + i) / 8;
    for (int64_t i = 0; i < 8; ++i) var += std::pow(xin.get_f64(r * 8 + i) - mu, 2) / 8;
    const double is = 1 / std::sqrt(var + 1e-5);
    mean.push_back(mu);
    inv.push_back(is);
    for (int64_t i = 0; i < 8; ++i)
      want.push_back((xin.get_f64(r * 8 + i) - mu) * is * sin.get_f64(i) + bin.get_f64(i));
  }
  EXPECT_TRUE(near(want, y[0], 2e-3, 2e-3));
  EXPECT_TRUE(near(mean, y[1], 1e-6, 1e-6));
  EXPECT_TRUE(near(inv, y[2], 1e-6, 1e-5));
}

TEST(Gelu20, TanhApproximation) {
  GraphBuilder m(20);
  ValueId x = m.input("x", {4000}, DType::Float);
  m.outputs({m.node("Gelu", {x}, {NewAttr::String("approximate", "tanh")}), m.node("Gelu", {x})});
  std::vector<float> xv = randn(4000, 41, 3.f);
  rt::Session s(m.model());
  auto y = s.run({test::make<float>(DType::Float, {4000}, xv)});
  std::vector<double> tanh_form, erf_form;
  for (float v : xv) {
    const double d = v;
    tanh_form.push_back(0.5 * d * (1 + std::tanh(std::sqrt(2 / M_PI) * (d + 0.044715 * d * d * d))));
    erf_form.push_back(0.5 * d * (1 + std::erf(d / std::sqrt(2.0))));
  }
  EXPECT_TRUE(near(tanh_form, y[0], 1e-6, 1e-5));
  EXPECT_TRUE(near(erf_form, y[1], 1e-6, 1e-5));
}

// ------------------------------------------------------------------ ONNX Runtime 1.30

namespace {

// Saves the model (types inferred, as ORT wants them on the outputs), runs it in ORT and in our
// runtime, and compares every output: |ours - ort| <= 1e-5 + 1e-4 |ort|.
void agree_with_ort(GraphBuilder& m, const std::vector<std::pair<std::string, rt::Tensor>>& feeds,
                    const std::string& tag) {
  SCOPED_TRACE(tag);
  infer_shapes(m.model());
  const auto path = test::temp_dir("ort_" + tag) / (tag + ".onnx");
  save_model(m.model(), path);
  std::string error;
  auto theirs = test::ort_run(path, feeds, &error);
  ASSERT_TRUE(error.empty()) << error;
  auto loaded = load_model(path);
  rt::Session s(*loaded);
  std::vector<rt::Tensor> ins;
  for (auto& f : feeds) ins.push_back(f.second);
  auto ours = s.run(ins);
  auto names = s.output_names();
  ASSERT_EQ(theirs.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const rt::Tensor& t = theirs.at(names[i]);
    ASSERT_EQ(t.shape, ours[i].shape) << names[i];
    std::vector<double> want;
    for (int64_t e = 0; e < t.numel(); ++e) want.push_back(t.get_f64(e));
    EXPECT_TRUE(near(want, ours[i], 1e-5, 1e-4)) << "output " << names[i];
  }
}

}  // namespace

TEST(TransformerOpsVsOrt, Attention) {
  if (!test::ort_peer_installed()) GTEST_SKIP() << "ONNX Runtime peer missing: tools/peers/install.sh";
  auto go = [](AttnCase c, const std::string& tag) {
    const AttnData d = make_data(c, 600);
    GraphBuilder m(c.nonpad ? 24 : 23);
    agree_with_ort(m, build(m, c, d), tag);
  };
  AttnCase gqa;  // 4-D, GQA 2:1, causal, past cache, present outputs
  gqa.Hkv = 2, gqa.Sq = 3, gqa.Skv = 3, gqa.P = 4, gqa.causal = true;
  go(gqa, "gqa_causal_past");
  AttnCase gqa4 = gqa;  // 4:1, no past, causal square
  gqa4.Hkv = 1, gqa4.P = 0, gqa4.Sq = gqa4.Skv = 6;
  go(gqa4, "gqa4_causal");
  AttnCase cross;  // causal with q_len < kv_len and no past: ORT's frontier is top-left too
  cross.Sq = 2, cross.Skv = 5, cross.causal = true;
  go(cross, "causal_q_lt_kv");
  AttnCase m3;  // 3-D with an additive mask over (B, 1, Sq, T) and a custom scale
  m3.three_d = true, m3.Hkv = 2, m3.mask = 2, m3.mask_shape = {m3.B, 1, m3.Sq, m3.T()}, m3.scale = 0.2f;
  go(m3, "3d_float_mask");
  AttnCase b3;  // 3-D bool mask (Sq, T), softcap, qk output mode 0
  b3.three_d = true, b3.mask = 1, b3.mask_shape = {b3.Sq, b3.T()}, b3.softcap = 2.f, b3.qk_mode = 0;
  go(b3, "3d_bool_mask_softcap");
  AttnCase long_seq;  // more than one score tile
  long_seq.Sq = long_seq.Skv = 130, long_seq.Hq = 2, long_seq.Hkv = 2, long_seq.causal = true;
  go(long_seq, "long_causal");
  AttnCase dead;  // a fully masked query row: zeros in ORT 1.30 too
  dead.mask = 1, dead.mask_shape = {dead.B, 1, dead.Sq, dead.T()}, dead.dead_row = 1;
  go(dead, "dead_row");
  dead.mask = 2;
  go(dead, "dead_row_float");
  AttnCase decode;  // a decode step: GQA 4:1 over a long past with an additive padding mask
  decode.Hq = 8, decode.Hkv = 2, decode.Sq = decode.Skv = 1, decode.P = 1023, decode.D = decode.Dv = 64;
  decode.mask = 2, decode.mask_shape = {decode.B, 1, 1, decode.T()}, decode.pad_keys = 100;
  go(decode, "decode_gqa_past_1023");
  AttnCase padded;  // Attention-24: an external cache with per-batch valid lengths, causal
  padded.nonpad = true, padded.causal = true, padded.Sq = 2, padded.Skv = 6, padded.Hkv = 2;
  go(padded, "nonpad_causal");
}

TEST(TransformerOpsVsOrt, RotaryNormsGeluSwish) {
  if (!test::ort_peer_installed()) GTEST_SKIP() << "ONNX Runtime peer missing: tools/peers/install.sh";
  uint32_t seed = 700;
  for (const RopeCase& c : rope_cases()) {
    RopeModel r;
    build_rope(r, c, seed += 5);
    agree_with_ort(r.m, r.feeds,
                   "rope_" + std::to_string(c.three_d) + std::to_string(c.interleaved) + std::to_string(c.with_pos) +
                       std::to_string(c.rot));
  }
  {
    GraphBuilder m(23);
    ValueId x = m.input("x", {2, 3, 16}, DType::Float);
    ValueId s = m.init<float>("scale", {16}, randn(16, 3), DType::Float);
    m.outputs({m.node("RMSNormalization", {x, s}, {NewAttr::Float("epsilon", 1e-6f)})});
    m.model().ir_version = 11;
    agree_with_ort(m, {{"x", test::make<float>(DType::Float, {2, 3, 16}, randn(96, 4, 2.f))}}, "rms");
  }
  {
    GraphBuilder m(24);
    ValueId x = m.input("x", {2, 500}, DType::Float);
    ValueId s = m.init<float>("scale", {500}, randn(500, 5), DType::Float);
    ValueId b = m.init<float>("bias", {500}, randn(500, 6), DType::Float);
    ValueId ln = m.node("LayerNormalization", {x, s, b}, {NewAttr::Float("epsilon", 1e-12f)});
    m.outputs({ln, m.node("Gelu", {x}, {NewAttr::String("approximate", "tanh")}), m.node("Gelu", {x}),
               m.node("Swish", {x}), m.node("Swish", {x}, {NewAttr::Float("alpha", 1.702f)})});
    m.model().ir_version = 11;
    agree_with_ort(m, {{"x", test::make<float>(DType::Float, {2, 500}, randn(1000, 7, 3.f))}}, "ln_gelu_swish");
  }
}

// The plan runs Gelu-20 (both forms) and Swish-24 (alpha 1) after a MatMul in its epilogue, as
// it does for the decomposed chains they replace: the same numbers as the unfused plan.
TEST(TransformerOpsFusion, GeluAndSwishInTheMatMulEpilogue) {
  for (const char* act : {"Gelu", "GeluTanh", "Swish", "SwishAlpha"}) {
    SCOPED_TRACE(act);
    GraphBuilder m(24);
    ValueId x = m.input("x", {2, 37, 64}, DType::Float);
    ValueId w = m.init<float>("w", {64, 96}, randn(64 * 96, 3, 0.2f), DType::Float);
    ValueId y = m.node("MatMul", {x, w});
    const std::string a = act;
    std::vector<NewAttr> attrs;
    if (a == "GeluTanh") attrs.push_back(NewAttr::String("approximate", "tanh"));
    if (a == "SwishAlpha") attrs.push_back(NewAttr::Float("alpha", 1.5f));
    m.outputs({m.node(a.rfind("Gelu", 0) == 0 ? "Gelu" : "Swish", {y}, attrs)});
    m.model().ir_version = 12;
    rt::Session fused(m.model()), plain(m.model(), rt::SessionOptions{false, true, false, true});
    EXPECT_EQ(fused.fused_count(), a == "SwishAlpha" ? 0u : 1u);
    const rt::Tensor xin = test::make<float>(DType::Float, {2, 37, 64}, randn(2 * 37 * 64, 4, 2.f));
    auto want = plain.run({xin})[0];
    for (int run = 0; run < 2; ++run) {
      auto got = fused.run({xin})[0];
      std::vector<double> w64;
      for (int64_t e = 0; e < want.numel(); ++e) w64.push_back(want.get_f64(e));
      EXPECT_TRUE(near(w64, got, 1e-6, 1e-5)) << "run " << run;
    }
  }
}

// A fused QKV projection's Split read only by one Attention runs as one step that reads Q, K
// and V in place from the Split's input (split_attention_kernel): the same bits as the Split
// and the Attention run apart, for 3-D MHA and GQA with a mask, causal with a past cache (the
// present outputs too), uneven sizes from num_outputs, the last axis written as 2 (GPT-2's
// export), and with copies for a 4-D input or a split on another axis; and no fusion where a
// part is also read elsewhere. A mask computed after the Split in the graph's node order
// (BERT's first layer) is planned before it; a mask computed from the Split's K part cannot
// be, and nothing fuses.
TEST(TransformerOpsFusion, SplitIntoAttentionReadsQkvInPlace) {
  enum class Mask { Input, After, FromK };
  struct Case {
    const char* name;
    int64_t B, S, Hq, Hkv, D;
    bool mask, past, four_d, num_outputs, extra_use;
    int64_t axis;
    Mask mask_from;
    size_t fused;
  };
  const Case cases[] = {
      {"mha mask", 1, 70, 4, 4, 16, true, false, false, false, false, -1, Mask::Input, 1},
      {"gqa causal past", 2, 9, 4, 2, 8, false, true, false, false, false, -1, Mask::Input, 1},
      {"num_outputs", 2, 5, 3, 3, 5, false, false, false, true, false, -1, Mask::Input, 1},
      {"4-d", 2, 6, 2, 2, 8, true, false, true, false, false, -1, Mask::Input, 1},
      {"part also a graph output", 1, 5, 2, 2, 8, false, false, false, false, true, -1, Mask::Input, 0},
      {"axis 1", 1, 6, 2, 2, 8, false, false, false, false, false, 1, Mask::Input, 1},
      {"axis 2 of 3-d", 2, 7, 3, 1, 8, true, false, false, false, false, 2, Mask::Input, 1},
      {"mask computed after the split", 1, 12, 2, 2, 8, true, false, false, false, false, -1, Mask::After, 1},
      {"mask computed from k", 1, 12, 2, 2, 8, true, false, false, false, false, -1, Mask::FromK, 0},
  };
  uint32_t seed = 500;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    GraphBuilder m(c.past ? 24 : 23);
    const int64_t width = (c.Hq + 2 * c.Hkv) * c.D + (c.num_outputs ? 1 : 0);
    std::vector<int64_t> xs =
        c.four_d ? std::vector<int64_t>{c.B, c.Hq, c.S, 3 * c.D} : std::vector<int64_t>{c.B, c.S, width};
    if (c.axis == 1) xs = {c.B, 3 * c.S, c.Hq * c.D};
    std::vector<std::pair<std::string, rt::Tensor>> feeds;
    auto feed = [&](const std::string& name, const std::vector<int64_t>& shape, float sd) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      feeds.emplace_back(name, test::make<float>(DType::Float, shape, randn(static_cast<size_t>(n), ++seed, sd)));
      return m.input(name, shape, DType::Float);
    };
    ValueId x = feed("x", xs, 1.5f);
    std::vector<ValueId> split_in{x};
    std::vector<NewAttr> split_attrs{NewAttr::Int("axis", c.axis)};
    if (c.num_outputs) {
      split_attrs.push_back(NewAttr::Int("num_outputs", 3));
    } else if (!c.four_d && c.axis != 1) {
      split_in.push_back(m.i64("sizes", {c.Hq * c.D, c.Hkv * c.D, c.Hkv * c.D}));
    } else if (c.four_d) {
      split_in.push_back(m.i64("sizes", {c.D, c.D, c.D}));
    }
    const std::vector<ValueId> qkv = m.node_n("Split", split_in, split_attrs, 3);
    std::vector<ValueId> ins = qkv;
    std::vector<NewAttr> attrs;
    int64_t heads_q = c.Hq, heads_kv = c.Hkv;
    if (c.num_outputs) heads_q = heads_kv = 1;  // parts of 16, 16 and 15 columns: one head each, Dv 15
    attrs = {NewAttr::Int("q_num_heads", heads_q), NewAttr::Int("kv_num_heads", heads_kv)};
    if (c.mask) {
      ValueId mask = feed("mask", {1, 1, c.S, c.S}, 1.f);
      // Nodes added now come after the Split in the graph's order.
      if (c.mask_from == Mask::After) mask = m.node("Mul", {mask, m.f32("half", {}, {0.5f})});
      if (c.mask_from == Mask::FromK)
        mask = m.node("Add", {mask, m.node("ReduceMax", {qkv[1]}, {NewAttr::Int("keepdims", 0)})});
      ins.push_back(mask);
    }
    size_t outs = 1;
    if (c.past) {
      ins.resize(4);
      ins.push_back(feed("past_key", {c.B, c.Hkv, 3, c.D}, 1.f));
      ins.push_back(feed("past_value", {c.B, c.Hkv, 3, c.D}, 1.f));
      attrs.push_back(NewAttr::Int("is_causal", 1));
      outs = 3;
    }
    std::vector<ValueId> ys = m.node_n("Attention", ins, attrs, outs);
    if (c.extra_use) ys.push_back(qkv[1]);
    m.outputs(ys);
    m.model().ir_version = c.past ? 12 : 11;
    rt::Session fused(m.model()), plain(m.model(), rt::SessionOptions{false, true, false, true});
    EXPECT_EQ(fused.fused_count(), c.fused);
    std::vector<rt::Tensor> in;
    for (const auto& f : feeds) in.push_back(f.second);
    const auto want = plain.run(in);
    for (int run = 0; run < 2; ++run) {
      const auto got = fused.run(in);
      ASSERT_EQ(got.size(), want.size());
      for (size_t o = 0; o < want.size(); ++o) {
        ASSERT_EQ(got[o].shape, want[o].shape) << "output " << o;
        for (int64_t e = 0; e < want[o].numel(); ++e)
          ASSERT_EQ(got[o].get_f64(e), want[o].get_f64(e)) << "run " << run << " output " << o << " element " << e;
      }
    }
  }
}

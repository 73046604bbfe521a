// fuse_conv_batchnorm — Conv/ConvTranspose → BatchNormalization becomes one convolution with
// rescaled weights and bias, and BatchNormalization → Conv too when the Conv does no padding
// (padding zeros after the affine map is not the affine map of padded zeros). Arithmetic in
// float64, rounded once. Every weight the fold rewrites must be a constant read only by this
// Conv (never fold into shared weights), and the intermediate must have no other reader.  class 1
#include <tbb/parallel_for.h>

#include <cmath>
#include <memory>
#include <optional>
#include <cstring>

#include "passes/edits.h"
#include "passes/graph_util.h"
#include "passes/registry.h"

namespace onnxforge::passes {
namespace {

struct Folded {
  DType dtype = DType::Undefined;
  std::vector<int64_t> wdims;
  int64_t out_ch = 0;
  std::vector<std::byte> w, b;
};

struct Match {
  NodeId conv, bn;
  bool bn_first = false;                 // BatchNormalization → Conv
  std::shared_ptr<const Folded> folded;  // new weights, computed in analyze (in parallel)
};

std::optional<Folded> fold(const Graph& g, const Match& m);

bool float_type(DType t) { return t == DType::Float || t == DType::Double; }

bool bn_inference(const Graph& g, const Uses& uses, NodeId bn) {
  if (g.attr_int(bn, "training_mode", 0) != 0) return false;
  for (size_t i = 1; i < g.outputs(bn).size(); ++i)
    if (g.output(bn, i).valid() && uses.used(g.output(bn, i))) return false;
  for (size_t i = 1; i <= 4; ++i)
    if (!constant_tensor(g, g.input(bn, i)).valid()) return false;
  return g.inputs(bn).size() == 5;
}

bool weights_private(const Graph& g, const Uses& uses, NodeId conv) {
  ValueId w = g.input(conv, 1), b = g.input(conv, 2);
  if (!constant_tensor(g, w).valid() || !uses.single(w) || g.producer(w).valid()) return false;
  if (b.valid() && (!constant_tensor(g, b).valid() || !uses.single(b) || g.producer(b).valid())) return false;
  if (!float_type(g.model().tensors.dtype(constant_tensor(g, w)))) return false;
  return g.model().tensors.dims(constant_tensor(g, w)).size() >= 3;
}

bool no_padding(const Graph& g, NodeId conv) {
  std::string_view ap = g.attr_string(conv, "auto_pad", "NOTSET");
  if (ap != "NOTSET" && ap != "VALID") return false;
  for (int64_t p : g.attr_ints(conv, "pads"))
    if (p != 0) return false;
  return g.attr_int(conv, "group", 1) == 1;
}

std::vector<Match> analyze(const Graph& g, const Uses& uses, const PassOptions&) {
  std::vector<Match> out;
  for (NodeId bn : g.nodes()) {
    if (!is(g, bn, "BatchNormalization") || !bn_inference(g, uses, bn)) continue;
    // Conv → BN
    NodeId conv = producer_of(g, bn, 0);
    if (is_one_of(g, conv, {"Conv", "ConvTranspose"}) && uses.single(g.input(bn, 0)) &&
        weights_private(g, uses, conv)) {
      out.push_back({conv, bn, false, nullptr});
      continue;
    }
    // BN → Conv
    NodeId next = single_consumer(g, uses, bn);
    if (is(g, next, "Conv") && g.input(next, 0) == g.output(bn, 0) && weights_private(g, uses, next) &&
        no_padding(g, next))
      out.push_back({next, bn, true, nullptr});
  }
  // The float64 arithmetic over the weights is the expensive part: all matches in parallel.
  tbb::parallel_for(size_t{0}, out.size(), [&](size_t i) {
    if (auto f = fold(g, out[i])) out[i].folded = std::make_shared<const Folded>(std::move(*f));
  });
  return out;
}

std::vector<double> doubles(const Graph& g, ValueId v) {
  auto c = constant_values(g, v);
  return c ? *c : std::vector<double>{};
}

std::vector<std::byte> encode(const std::vector<double>& v, DType t) {
  std::vector<std::byte> out(v.size() * (t == DType::Double ? 8 : 4));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::Double)
      std::memcpy(out.data() + i * 8, &v[i], 8);
    else {
      float f = static_cast<float>(v[i]);
      std::memcpy(out.data() + i * 4, &f, 4);
    }
  }
  return out;
}

std::optional<Folded> fold(const Graph& g, const Match& m) {
  const TensorStore& ts = g.model().tensors;
  TensorId wt = constant_tensor(g, g.input(m.conv, 1));
  DType dt = ts.dtype(wt);
  std::vector<int64_t> wdims(ts.dims(wt).begin(), ts.dims(wt).end());
  std::vector<double> w = doubles(g, g.input(m.conv, 1));
  std::vector<double> scale = doubles(g, g.input(m.bn, 1)), beta = doubles(g, g.input(m.bn, 2)),
                      mean = doubles(g, g.input(m.bn, 3)), var = doubles(g, g.input(m.bn, 4));
  double eps = g.attr_float(m.bn, "epsilon", 1e-5f);
  size_t C = scale.size();
  if (w.empty() || beta.size() != C || mean.size() != C || var.size() != C) return std::nullopt;
  std::vector<double> s(C);
  for (size_t c = 0; c < C; ++c) s[c] = scale[c] / std::sqrt(var[c] + eps);

  bool transpose = is(g, m.conv, "ConvTranspose");
  int64_t group = g.attr_int(m.conv, "group", 1);
  int64_t out_ch = transpose ? wdims[1] * group : wdims[0];
  size_t inner = 1;
  for (size_t i = 2; i < wdims.size(); ++i) inner *= static_cast<size_t>(wdims[i]);
  std::vector<double> b =
      g.input(m.conv, 2).valid() ? doubles(g, g.input(m.conv, 2)) : std::vector<double>(out_ch, 0.0);
  if (static_cast<int64_t>(b.size()) != out_ch) return std::nullopt;

  if (!m.bn_first) {
    if (static_cast<int64_t>(C) != out_ch) return std::nullopt;
    if (!transpose) {
      for (int64_t o = 0; o < wdims[0]; ++o)
        for (size_t k = 0; k < static_cast<size_t>(wdims[1]) * inner; ++k) w[o * wdims[1] * inner + k] *= s[o];
    } else {  // [C_in, C_out/group, k...]: output channel = (i / (C_in/group)) * (C_out/group) + j
      int64_t cin = wdims[0], cout_g = wdims[1], cin_g = cin / group;
      for (int64_t i = 0; i < cin; ++i)
        for (int64_t j = 0; j < cout_g; ++j) {
          int64_t o = (i / cin_g) * cout_g + j;
          for (size_t k = 0; k < inner; ++k) w[(i * cout_g + j) * inner + k] *= s[o];
        }
    }
    for (int64_t o = 0; o < out_ch; ++o) b[o] = (b[o] - mean[o]) * s[o] + beta[o];
  } else {  // BN → Conv (group 1, no padding): W'[o,c] = W[o,c]*s[c]; b'[o] = b[o] + Σ W[o,c,k]*(β[c]-μ[c]s[c])
    if (transpose || static_cast<int64_t>(C) != wdims[1]) return std::nullopt;
    for (int64_t o = 0; o < wdims[0]; ++o)
      for (size_t c = 0; c < C; ++c) {
        double shift = beta[c] - mean[c] * s[c];
        for (size_t k = 0; k < inner; ++k) {
          double& x = w[(o * C + c) * inner + k];
          b[o] += x * shift;
          x *= s[c];
        }
      }
  }
  Folded f;
  f.dtype = dt;
  f.wdims = wdims;
  f.out_ch = out_ch;
  f.w = encode(w, dt);
  f.b = encode(b, dt);
  return f;
}

bool apply(Edits& e, const Match& m) {
  const Graph& g = e.g;
  // Checked before the new weights are added: a stale match must leave no orphan constants.
  if (!m.folded || e.any_touched(m.conv, m.bn)) return false;
  const Folded& f = *m.folded;
  auto attrs = copy_attrs(g, m.conv);
  if (!attrs) return false;
  std::string hint(str(g.value_name(g.input(m.conv, 1))));
  ValueId nw = e.new_constant(hint, f.dtype, f.wdims, f.w);
  std::vector<int64_t> bdims{f.out_ch};
  ValueId nb = e.new_constant(hint + "_bias", f.dtype, bdims, f.b);
  ValueId x = m.bn_first ? g.input(m.bn, 0) : g.input(m.conv, 0);
  NodeId first = m.bn_first ? m.bn : m.conv, last = m.bn_first ? m.conv : m.bn;
  return e.replace_with({first, last}, str(g.op_type(m.conv)), {x, nw, nb}, std::move(*attrs)).valid();
}

}  // namespace

ONNXFORGE_PASS(fuse_conv_batchnorm, Match, AccuracyClass::FloatBounded, analyze, apply,
               {"BatchNormalization", "Conv", "ConvTranspose"},
               "fold BatchNormalization into Conv/ConvTranspose weights (float64, private weights)");

}  // namespace onnxforge::passes

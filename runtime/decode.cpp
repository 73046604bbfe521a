#include "runtime/decode.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <sstream>

#include "ir/error.h"
#include "runtime/inputs.h"
#include "runtime/runtime.h"
#include "runtime/verify.h"

namespace onnxforge::rt {
namespace {

constexpr size_t kNone = static_cast<size_t>(-1);

// Where a decoder's pieces are among a session's inputs and outputs (by name: optimum's layout).
struct Roles {
  size_t ids = kNone, mask = kNone, positions = kNone, logits = kNone;
  std::vector<std::pair<size_t, size_t>> cache;  // past_key_values.* input -> present.* output
};

Roles roles_of(const Session& s, const std::string& which) {
  Roles r;
  const auto ins = s.input_names(), outs = s.output_names();
  for (size_t i = 0; i < ins.size(); ++i) {
    const std::string& n = ins[i];
    if (n == "input_ids")
      r.ids = i;
    else if (n == "attention_mask")
      r.mask = i;
    else if (n == "position_ids")
      r.positions = i;
    else if (n.starts_with("past_key_values.")) {
      const std::string present = "present." + n.substr(std::strlen("past_key_values."));
      size_t o = 0;
      while (o < outs.size() && outs[o] != present) ++o;
      if (o == outs.size()) fail(which, ": input '", n, "' has no output '", present, "' to feed it in the next step");
      r.cache.push_back({i, o});
    }
  }
  for (size_t o = 0; o < outs.size(); ++o)
    if (outs[o] == "logits") r.logits = o;
  if (r.ids == kNone) fail(which, ": not a decoder: it has no input named 'input_ids'");
  if (r.cache.empty())
    fail(which,
         ": not a decoder with a KV cache: no past_key_values.* inputs with present.* outputs (optimum's "
         "layout; export with use_cache / the -with-past task)");
  if (r.logits == kNone) fail(which, ": not a decoder: it has no output named 'logits'");
  return r;
}

// The declared dim name at `axis` of input `i`, or "" when static or unnamed.
std::string dim_name(const Session& s, size_t i, size_t axis) {
  const Graph& g = s.model().main();
  const ValueId v = s.input_values()[i];
  if (!g.has_shape(v) || g.shape(v).size() <= axis) return {};
  const Dim& d = g.shape(v)[axis];
  return d.known() ? std::string() : std::string(str(d.param));
}

Tensor int64s(Shape shape, const std::vector<int64_t>& values) {
  Tensor t = Tensor::alloc(DType::Int64, std::move(shape));
  std::memcpy(t.data, values.data(), t.bytes());
  return t;
}

// One model's side of the loop: its session, roles, the cache it carries.
struct Side {
  const char* which;
  Session session;
  Roles roles;
  std::vector<Tensor> cache;  // present.* of the last step, in roles.cache order
  double seconds = 0;
  Side(const char* w, const Model& m) : which(w), session(m, options_for(m)), roles(roles_of(session, w)) {}
  // Past 512 MiB of weights each run reads them in place, as verification does
  // (passes/verification.cpp): a packed copy would double the peak (TinyLlama-1.1B: 5.0 GB).
  static SessionOptions options_for(const Model& m) {
    SessionOptions o = comparison_options();
    if (m.tensors.total_bytes() > (uint64_t{512} << 20)) o.pack_weights = false;
    return o;
  }
};

std::vector<int64_t> greedy(const Tensor& logits) {
  // logits [batch, sequence, vocab]: the argmax of the last position of each row.
  if (logits.rank() != 3 || logits.dtype != DType::Float)
    fail("logits must be float32 [batch, sequence, vocab], got ", shape_str(logits.shape), " ",
         dtype_name(logits.dtype));
  const int64_t B = logits.shape[0], S = logits.shape[1], V = logits.shape[2];
  std::vector<int64_t> out;
  for (int64_t b = 0; b < B; ++b) {
    const float* row = logits.ptr<float>() + (b * S + S - 1) * V;
    int64_t best = 0;
    for (int64_t v = 1; v < V; ++v)
      if (row[v] > row[best]) best = v;
    out.push_back(best);
  }
  return out;
}

}  // namespace

DecodeReport verify_decode(const Model& reference, const Model& candidate, const DecodeOptions& o) {
  if (o.steps < 0 || o.prompt < 1) fail("decode verification needs a prompt of at least 1 token and steps >= 0");
  Side ref("original", reference), cand("optimized", candidate);
  const Session& rs = ref.session;
  const Roles& rr = ref.roles;
  if (cand.roles.cache.size() != rr.cache.size())
    fail("the optimized model has ", cand.roles.cache.size(), " cache inputs, the original ", rr.cache.size());

  // Sizes: batch from the options (default 1); the cache's heads and head size are static dims
  // of past_key_values.*; the rest follows the step.
  const std::string batch_name = dim_name(rs, rr.ids, 0);
  int64_t B = 1;
  if (auto it = o.dims.find(batch_name); !batch_name.empty() && it != o.dims.end()) B = it->second;
  const Graph& g = rs.model().main();
  std::vector<Shape> cache_shape;  // per cache input: [B, heads, 0, head_size]
  for (auto [in, out] : rr.cache) {
    const ValueId v = rs.input_values()[in];
    if (!g.has_shape(v) || g.shape(v).size() != 4 || !g.shape(v)[1].known() || !g.shape(v)[3].known())
      fail("original: cache input '", rs.input_names()[in],
           "' must be [batch, heads, past, head_size] with static heads and head_size");
    cache_shape.push_back({B, g.shape(v)[1].value, 0, g.shape(v)[3].value});
  }
  for (size_t k = 0; k < rr.cache.size(); ++k) {
    ref.cache.push_back(Tensor::alloc(DType::Float, cache_shape[k]));
    cand.cache.push_back(Tensor::alloc(DType::Float, cache_shape[k]));
  }

  // The prompt: token ids within the embedding table (inputs.h), the seed's.
  std::map<std::string, int64_t> dims = o.dims;
  auto set_dim = [&](size_t input, size_t axis, int64_t value) {
    if (std::string n = dim_name(rs, input, axis); !n.empty()) dims[n] = value;
  };
  if (!batch_name.empty()) dims[batch_name] = B;
  DecodeReport rep;
  rep.layers = rr.cache.size() / 2;
  std::vector<int64_t> tokens;
  int64_t past = 0;
  for (int step = 0; step <= o.steps; ++step) {
    const int64_t S = step == 0 ? o.prompt : 1;
    set_dim(rr.ids, 1, S);
    if (rr.mask != kNone) set_dim(rr.mask, 1, past + S);
    set_dim(rr.cache[0].first, 2, past);
    // Inputs other than the decoder's own (rare) are generated as `run` would.
    InputPlan plan = plan_inputs(g, rs.input_values(), dims);
    std::vector<Tensor> generated = make_inputs(plan, o.seed + static_cast<uint64_t>(step));
    std::map<std::string, Tensor> named;
    const auto names = rs.input_names();
    for (size_t i = 0; i < names.size(); ++i) named[names[i]] = generated[i];
    if (step == 0) {
      const Tensor& ids = generated[rr.ids];  // TokenIds: within the vocabulary
      named["input_ids"] = cast(ids, DType::Int64);
    } else {
      named["input_ids"] = int64s({B, 1}, tokens);
    }
    if (rr.mask != kNone)
      named["attention_mask"] = int64s({B, past + S}, std::vector<int64_t>(static_cast<size_t>(B * (past + S)), 1));
    if (rr.positions != kNone) {
      std::vector<int64_t> pos;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t s = 0; s < S; ++s) pos.push_back(past + s);
      named["position_ids"] = int64s({B, S}, pos);
    }
    DecodeStep st;
    st.past = past;
    st.sequence = S;
    std::vector<Tensor> logits;
    for (Side* side : {&ref, &cand}) {
      const auto in_names = side->session.input_names();
      std::vector<Tensor> inputs;
      for (size_t i = 0; i < in_names.size(); ++i) {
        auto it = named.find(in_names[i]);
        if (it == named.end()) fail(side->which, ": input '", in_names[i], "' is not an input of the original");
        Tensor t = it->second;
        const DType want = side->session.model().main().dtype(side->session.input_values()[i]);
        if (want != DType::Undefined && want != t.dtype) t = cast(t, want);
        inputs.push_back(std::move(t));
      }
      for (size_t k = 0; k < side->roles.cache.size(); ++k) {
        Tensor& c = side->cache[k];
        const DType want = side->session.model().main().dtype(side->session.input_values()[side->roles.cache[k].first]);
        inputs[side->roles.cache[k].first] = want != DType::Undefined && want != c.dtype ? cast(c, want) : c;
      }
      auto t0 = std::chrono::steady_clock::now();
      std::vector<Tensor> out;
      try {
        out = side->session.run(inputs);
      } catch (const Error& e) {
        fail(side->which, " model, decode step ", step, " (past ", past, ", sequence ", S, "): ", e.what());
      }
      side->seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      for (size_t k = 0; k < side->roles.cache.size(); ++k) {
        Tensor c = out[side->roles.cache[k].second];
        side->cache[k] = c.dtype == DType::Float ? c : cast(c, DType::Float);
        if (c.rank() != 4 || c.shape[2] != past + S)
          fail(side->which, " model, decode step ", step, ": '",
               side->session.output_names()[side->roles.cache[k].second], "' has shape ", shape_str(c.shape),
               ", expected ", past + S, " positions");
      }
      Tensor l = out[side->roles.logits];
      logits.push_back(l.dtype == DType::Float ? l : cast(l, DType::Float));
    }
    TensorDiff d = compare(logits[0], logits[1], o.atol, o.rtol, kMagnitudeFloor);
    st.max_abs = d.max_abs;
    st.tokens_ref = greedy(logits[0]);
    st.tokens_cand = greedy(logits[1]);
    st.pass = d.pass && st.tokens_ref == st.tokens_cand;
    if (!d.problem.empty())
      st.problem = d.problem;
    else if (!d.pass)
      st.problem = "logits differ beyond tolerance";
    else if (st.tokens_ref != st.tokens_cand)
      st.problem = "greedy tokens differ";
    rep.pass = rep.pass && st.pass;
    tokens = st.tokens_ref;  // both models continue from the original's choice
    past += S;
    rep.steps.push_back(std::move(st));
  }
  rep.seconds_ref = ref.seconds;
  rep.seconds_cand = cand.seconds;
  return rep;
}

nlohmann::json DecodeReport::to_json() const {
  nlohmann::json steps_json = nlohmann::json::array();
  for (const DecodeStep& s : steps)
    steps_json.push_back({{"past", s.past},
                          {"sequence", s.sequence},
                          {"max_diff", s.max_abs},
                          {"pass", s.pass},
                          {"tokens", s.tokens_ref},
                          {"tokens_optimized", s.tokens_cand},
                          {"problem", s.problem}});
  double worst = 0;
  for (const DecodeStep& s : steps) worst = std::max(worst, s.max_abs);
  return {{"pass", pass},
          {"layers", layers},
          {"steps", steps_json},
          {"max_diff", worst},
          {"seconds_original", seconds_ref},
          {"seconds_optimized", seconds_cand}};
}

std::string DecodeReport::to_text() const {
  std::ostringstream os;
  double worst = 0;
  for (const DecodeStep& s : steps) worst = std::max(worst, s.max_abs);
  const int decode_steps = steps.empty() ? 0 : static_cast<int>(steps.size()) - 1;
  os << "decode: prefill of " << (steps.empty() ? 0 : steps[0].sequence) << " tokens + " << decode_steps
     << " steps feeding each model its own cache (" << layers << " layers): ";
  if (pass) {
    os << "logits max_diff " << worst << ", greedy tokens agree at every step";
  } else {
    for (size_t i = 0; i < steps.size(); ++i)
      if (!steps[i].pass) {
        os << "FAILED at " << (i == 0 ? std::string("the prefill") : "step " + std::to_string(i)) << " (past "
           << steps[i].past << "): " << steps[i].problem << ", max_diff " << steps[i].max_abs;
        break;
      }
  }
  os << " (original " << seconds_ref * 1e3 << " ms, optimized " << seconds_cand * 1e3 << " ms in all)";
  return os.str();
}

}  // namespace onnxforge::rt

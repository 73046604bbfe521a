// The public C++ API (include/onnxforge/onnxforge.h) over the engine's entry points (engine.h).
// Compiled into libonnxforge.so only, whose sole exported symbols are the ones declared there.
#include "onnxforge/onnxforge.h"

#include <tbb/task_arena.h>

#include "api/engine.h"
#include "api/scratch.h"
#include "hierarchy/hierarchy.h"
#include "ir/error.h"
#include "runtime/verify.h"

namespace onnxforge {

struct LoadedModel::Impl {
  std::unique_ptr<Model> model;
  std::string source;
  std::filesystem::path path;                // the file the model was loaded from; empty if none
  std::shared_ptr<api::ScratchDir> scratch;  // holds `path` for models that came as bytes
};

LoadedModel::LoadedModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LoadedModel::LoadedModel(LoadedModel&&) noexcept = default;
LoadedModel& LoadedModel::operator=(LoadedModel&&) noexcept = default;
LoadedModel::~LoadedModel() = default;

const std::string& LoadedModel::source() const { return impl_->source; }
int64_t LoadedModel::nodes() const { return passes::measure(*impl_->model).nodes; }
int64_t LoadedModel::initializers() const { return passes::measure(*impl_->model).initializers; }
int64_t LoadedModel::initializer_bytes() const { return passes::measure(*impl_->model).bytes; }

namespace {

LoadedModel make(std::unique_ptr<Model> model, std::string source, std::filesystem::path path,
                 std::shared_ptr<api::ScratchDir> scratch) {
  auto impl = std::make_unique<LoadedModel::Impl>();
  impl->model = std::move(model);
  impl->source = std::move(source);
  impl->path = std::move(path);
  impl->scratch = std::move(scratch);
  return LoadedModel(std::move(impl));
}

// A file holding `m` as it is now (the engine's optimize and verify start from files).
struct FileOf {
  std::filesystem::path path;
  std::shared_ptr<api::ScratchDir> scratch;
};
FileOf file_of(const LoadedModel& m) {
  if (!m.impl().path.empty()) return {m.impl().path, m.impl().scratch};
  auto scratch = std::make_shared<api::ScratchDir>();
  std::filesystem::path p = scratch->path() / "model.onnx";
  save_model(*m.impl().model, p);
  return {p, scratch};
}

template <class F>
auto with_threads(int threads, F&& f) {
  if (threads <= 0) return f();
  tbb::task_arena arena(threads);
  return arena.execute(std::forward<F>(f));
}

}  // namespace

const char* version() { return "0.1.0"; }

LoadedModel load(const std::filesystem::path& path) { return make(load_model(path), path.string(), path, nullptr); }

LoadedModel load_bytes(std::string_view serialized) {
  auto scratch = std::make_shared<api::ScratchDir>();
  std::filesystem::path p = scratch->write("model.onnx", serialized);
  return make(load_model(p), "<bytes>", p, std::move(scratch));
}

void save(const LoadedModel& model, const std::filesystem::path& path, const SaveModelOptions& options) {
  onnxforge::SaveOptions so;
  so.placement = options.weights == WeightStorage::Embed      ? WeightPlacement::Embed
                 : options.weights == WeightStorage::External ? WeightPlacement::External
                                                              : WeightPlacement::Auto;
  so.external_min_bytes = options.external_min_bytes;
  save_model(*model.impl().model, path, so);
}

std::string to_bytes(const LoadedModel& model) { return api::model_bytes(*model.impl().model, model.source()); }

OptimizeResult optimize(const LoadedModel& model, const OptimizeOptions& options) {
  FileOf in = file_of(model);
  const api::OptimizeSettings s{.passes = options.passes,
                                .skip = options.skip,
                                .dims = options.dims,
                                .fold_size = options.fold_size,
                                .verify = options.verify,
                                .seeds = options.seeds,
                                .target_opset = options.target_opset,
                                .target = options.target,
                                .progress = options.progress};
  api::OptimizeOutcome o = with_threads(options.threads, [&] { return api::optimize(in.path, s); });
  o.report["input"] = model.source();
  if (options.strip_hierarchy)
    hier::strip_hierarchy(*o.model);
  else
    hier::sync_tags_to_metadata(*o.model);

  OptimizeReport r;
  r.nodes_before = o.run.before.nodes;
  r.nodes_after = o.run.after.nodes;
  r.initializers_before = o.run.before.initializers;
  r.initializers_after = o.run.after.initializers;
  r.bytes_before = o.run.before.bytes;
  r.bytes_after = o.run.after.bytes;
  r.rounds = o.run.rounds;
  r.worst_accuracy_class = static_cast<int>(o.run.worst);
  for (const passes::PassStats& p : o.run.passes)
    r.passes.push_back({p.name, static_cast<int>(p.accuracy), p.removed.nodes, p.removed.initializers, p.removed.bytes,
                        p.applied, p.rounds, p.seconds()});
  r.verified = o.verified;
  r.verification_passed = o.ok();
  r.max_diff = o.verification.max_diff;
  r.seeds = o.seeds;
  r.breaking_pass = o.breaking_pass;
  r.hint = o.hint;
  if (!o.ok()) r.failure = api::verification_failure_text(o);
  r.json = o.report.dump(2);
  // The optimized model still reads weights from the input's mapping, which `in` keeps alive
  // when it is a scratch file.
  return {make(std::move(o.model), "<optimized>", {}, in.scratch), std::move(r)};
}

VerifyReport verify(const LoadedModel& reference, const LoadedModel& candidate, const VerifyOptions& options) {
  rt::VerifyOptions vo;
  vo.seeds = options.seeds;
  vo.first_seed = options.first_seed;
  vo.atol = options.atol;
  vo.rtol = options.rtol;
  vo.dims = options.dims;
  rt::VerifyReport v = rt::verify(*reference.impl().model, *candidate.impl().model, vo);
  VerifyReport r;
  r.pass = v.pass;
  r.seeds = v.seeds;
  for (const rt::OutputDiff& d : v.outputs) {
    r.outputs.push_back({d.name, d.max_abs_max, d.max_rel, d.pass, d.problem});
    r.max_diff = std::max(r.max_diff, d.max_abs_max);
  }
  r.text = v.to_text();
  r.json = v.to_json().dump(2);
  return r;
}

}  // namespace onnxforge

#include "ir/tensor.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "io/mapped_file.h"
#include "ir/anonymous_memory.h"
#include "ir/error.h"

namespace onnxforge {

namespace {

// The sources' bytes of a recipe. A source that is itself deferred and not computed yet (the
// transposed q/k/v weights a fused QKV weight concatenates) is computed into scratch memory freed
// with `scratch`, not materialized into the store: reading it through bytes() kept every such
// transpose for the model's lifetime (TinyLlama-1.1B: 22 x 20 MiB, in the writer and in each
// verification session).
struct RecipeSources {
  std::vector<std::span<const std::byte>> spans;
  std::vector<AnonymousMemory> scratch;  // not an allocator's: freed with the recipe
};
RecipeSources recipe_sources(const TensorStore& ts, const TensorRecipe& r) {
  RecipeSources out;
  out.scratch.reserve(r.sources.size());
  for (TensorId s : r.sources) {
    if (ts.is_deferred(s)) {
      AnonymousMemory& buf = out.scratch.emplace_back(ts.byte_size(s), "compute a deferred tensor");
      ts.compute_into(s, buf.span());
      out.spans.push_back(buf.span());
    } else {
      out.spans.push_back(ts.bytes(s));
    }
  }
  return out;
}

}  // namespace

TensorId TensorStore::add(Entry e, std::span<const int64_t> dims) {
  e.dims_begin = static_cast<uint32_t>(dims_.size());
  e.rank = static_cast<uint32_t>(dims.size());
  dims_.insert(dims_.end(), dims.begin(), dims.end());
  entries_.push_back(std::move(e));
  return TensorId(static_cast<uint32_t>(entries_.size() - 1));
}

void TensorStore::AlignedDelete::operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t(64)); }

std::span<std::byte> TensorStore::allocate(size_t bytes) { return allocate_owned(bytes); }

std::span<std::byte> TensorStore::allocate_owned(size_t bytes) const {
  // 64-byte alignment: kernels read weights with aligned vector loads where they can.
  auto* raw = static_cast<std::byte*>(::operator new[](bytes == 0 ? 1 : bytes, std::align_val_t(64)));
  std::lock_guard lock(owned_mutex_);
  owned_.emplace_back(raw);
  return {raw, bytes};
}

TensorId TensorStore::add_owned(Sym name, DType dtype, std::span<const int64_t> dims,
                                std::span<const std::byte> bytes) {
  auto buf = allocate(bytes.size());
  if (!bytes.empty()) std::memcpy(buf.data(), bytes.data(), bytes.size());
  Entry e;
  e.name = name;
  e.dtype = dtype;
  e.data = buf.data();
  e.size = bytes.size();
  e.storage = TensorStorage::Owned;
  e.changed = true;
  return add(std::move(e), dims);
}

TensorId TensorStore::add_strings(Sym name, std::span<const int64_t> dims, std::vector<std::string> strings) {
  Entry e;
  e.name = name;
  e.dtype = DType::String;
  e.storage = TensorStorage::Strings;
  e.strings_index = static_cast<uint32_t>(strings_.size());
  e.changed = true;
  strings_.push_back(std::move(strings));
  return add(std::move(e), dims);
}

TensorId TensorStore::add_deferred(Sym name, DType dtype, std::span<const int64_t> dims, uint64_t size,
                                   TensorRecipe recipe) {
  for (TensorId s : recipe.sources)
    if (!s.valid() || s.index() >= entries_.size()) fail("deferred tensor '", str(name), "' reads a missing tensor");
  Entry e;
  e.name = name;
  e.dtype = dtype;
  e.size = size;
  e.storage = TensorStorage::Deferred;
  e.changed = true;
  e.deferred = std::make_shared<Entry::Deferred>();
  e.deferred->recipe = std::move(recipe);
  has_deferred_ = true;
  return add(std::move(e), dims);
}

bool TensorStore::is_deferred(TensorId t) const {
  const Entry& e = entry(t);
  return e.deferred && !e.deferred->data.load(std::memory_order_acquire);
}

const TensorRecipe* TensorStore::recipe(TensorId t) const {
  const Entry& e = entry(t);
  return e.deferred ? &e.deferred->recipe : nullptr;
}

void TensorStore::compute_into(TensorId t, std::span<std::byte> out) const {
  const Entry& e = entry(t);
  if (out.size() != e.size) fail("compute_into: buffer of ", out.size(), " bytes for a tensor of ", e.size);
  if (!e.deferred) {
    if (e.size) std::memcpy(out.data(), e.data, e.size);
    return;
  }
  if (const std::byte* done = e.deferred->data.load(std::memory_order_acquire)) {
    if (e.size) std::memcpy(out.data(), done, e.size);
    return;
  }
  const TensorRecipe& r = e.deferred->recipe;
  RecipeSources sources = recipe_sources(*this, r);
  r.compute(sources.spans, out);
  for (TensorId s : r.sources) release_source_pages(s);
}

const std::byte* TensorStore::materialize(TensorId t) const {
  Entry::Deferred& d = *entry(t).deferred;
  if (const std::byte* p = d.data.load(std::memory_order_acquire)) return p;
  std::lock_guard lock(d.mutex);
  if (const std::byte* p = d.data.load(std::memory_order_relaxed)) return p;
  auto buf = allocate_owned(entry(t).size);
  RecipeSources sources = recipe_sources(*this, d.recipe);
  d.recipe.compute(sources.spans, buf);
  d.data.store(buf.data(), std::memory_order_release);
  return buf.data();
}

// The sources of a streamed tensor are usually read once (a weight and its transpose): dropping
// their pages keeps the writer's resident set at one tensor instead of the whole model.
void TensorStore::release_source_pages(TensorId source) const {
  const Entry& e = entry(source);
  if ((e.storage != TensorStorage::External && e.storage != TensorStorage::Embedded) || !e.source.file || !e.data)
    return;
  const MappedFile& f = *e.source.file;
  if (!f.contains(e.data) || !f.contains(e.data + e.size)) return;
  f.release(f.offset_of(e.data), f.offset_of(e.data) + e.size);
}

TensorStore::Entry TensorStore::resolved(TensorId t) const {
  Entry e = entry(t);
  if (e.deferred) {
    e.data = materialize(t);
    e.storage = TensorStorage::Owned;
    e.deferred.reset();
  }
  return e;
}

uint64_t TensorStore::element_count(TensorId t) const {
  uint64_t n = 1;
  for (int64_t d : dims(t)) n *= static_cast<uint64_t>(d);
  return n;
}

void TensorStore::replace(TensorId t, std::span<const int64_t> dims, std::span<const std::byte> bytes) {
  if (has_deferred_)
    for (size_t i = 0; i < entries_.size(); ++i) {
      const Entry& d = entries_[i];
      if (!d.deferred) continue;
      const auto& srcs = d.deferred->recipe.sources;
      if (std::find(srcs.begin(), srcs.end(), t) != srcs.end()) materialize(TensorId(static_cast<uint32_t>(i)));
    }
  auto buf = allocate(bytes.size());
  if (!bytes.empty()) std::memcpy(buf.data(), bytes.data(), bytes.size());
  Entry& e = entries_[t.index()];
  e.data = buf.data();
  e.size = bytes.size();
  e.storage = TensorStorage::Owned;
  e.changed = true;
  e.deferred.reset();
  e.external_info.clear();
  if (dims.size() == e.rank) {
    std::copy(dims.begin(), dims.end(), dims_.begin() + e.dims_begin);
  } else {
    e.dims_begin = static_cast<uint32_t>(dims_.size());
    e.rank = static_cast<uint32_t>(dims.size());
    dims_.insert(dims_.end(), dims.begin(), dims.end());
  }
}

void TensorStore::share(const TensorStore& from) {
  entries_ = from.entries_;
  dims_ = from.dims_;
  strings_ = from.strings_;
  has_deferred_ = from.has_deferred_;
  // An uncomputed deferred tensor would otherwise be computed into this store's memory and
  // published to `from` through the shared state, dangling once this store goes.
  for (Entry& e : entries_)
    if (e.deferred && !e.deferred->data.load(std::memory_order_acquire)) {
      auto d = std::make_shared<Entry::Deferred>();
      d->recipe = e.deferred->recipe;
      e.deferred = std::move(d);
    }
}

uint64_t TensorStore::total_bytes() const {
  uint64_t total = 0;
  for (const Entry& e : entries_) total += e.size;
  return total;
}

}  // namespace onnxforge

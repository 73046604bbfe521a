// GEMM driver: K/N blocking, A/B packing, tiles of C over TBB, and the public entry points.
#include "simd/gemm.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include <unistd.h>
#include <xmmintrin.h>

#include "simd/detail/gemm_driver.h"
#include "simd/detail/parallel.h"
#include "simd/detail/scratch.h"
#include "simd/kernels/gemm_direct.h"

namespace onnxforge::simd {
namespace detail {
namespace {

std::size_t round_up(std::size_t a, std::size_t b) { return ceil_div(a, b) * b; }

// Unpacked B is packed in column blocks of at most this many floats (K x width).
constexpr std::size_t kPackBudgetFloats = std::size_t{4} << 20;
// Panels per packing task (pack_b_columns).
constexpr std::size_t kPackGroupPanels = 8;
// Rows of C per tile (rounded to the micro-tile), and columns at most. A tile's B block for one
// K step (kc x 768 floats at most, 1.2 MB at kc = 384) must stay in L2 while the tile's rows
// stream past it: gemm_tile_cols() narrows the tiles where L2 is smaller.
// 128 rows rather than 512: more tiles than threads let a thread that the host slows down
// hand its share to the other (2 threads, alternating in one process: 1024^3 +11%, 1500 x
// 1536 x 384 +3%, 1500 x 384 x 1536 +5%; 1 thread and ResNet-50's 1x1 convs unchanged).
constexpr std::size_t kTileRows = 128, kTileCols = 768;
// Problems with at most this many rows use one row of tiles: their B panels are read in place
// or packed by the tile that uses them, instead of in a separate pass over all of B.
constexpr std::size_t kOneRowMaxRows = 128;
// Tiles of at most this many rows run the B panels in the outer loop (each panel, fresh from
// L3, serves all the tile's rows while it is in L1); taller tiles run the rows outer, each A
// micro-panel staying in L1 while the tile's B block streams from L2.
constexpr std::size_t kPanelOuterMaxRows = 64;
// A row-major B is read in place only if its rows are close enough for the TLB (one k step
// per row: a wide B would touch a new page every step).
constexpr std::size_t kInPlaceMaxLd = 1024;

// Columns per GEMM tile: the widest multiple of nr (at most kTileCols) whose B block of kc K
// steps takes at most 60% of one core's L2, the rest being A rows, C and the other stream's lines.
// On a Cascade Lake with 1 MB L2 the 768-column block (1.2 MB at kc = 384) spilled to L3 at
// every micro-row: 128 x 3072 x 768 at 1 thread ran at 62% of the FMA peak with 768 columns,
// 76% with 384 (perf/bench_gemm_vs_peak, thread CPU time; 128 x 768 x 3072 60% -> 67-72%).
std::size_t gemm_tile_cols(std::size_t kc, std::size_t nr) {
  static const std::size_t l2 = [] {
    const long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return v > 0 ? static_cast<std::size_t>(v) : std::size_t{2} << 20;
  }();
  const std::size_t cols = l2 * 6 / 10 / (kc * sizeof(float)) / nr * nr;
  return std::clamp(cols, nr, std::max(nr, kTileCols / nr * nr));
}

// Micro-kernels reading a row-major A in place (no A packing), for the table's ISA level.
const GemmDirectKernels& direct_kernels(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return avx512::gemm_direct_kernels();
    case Isa::Avx2: return avx2::gemm_direct_kernels();
    case Isa::Sse: break;
  }
  return sse::gemm_direct_kernels();
}

void pack_strided(const void* ctx, std::size_t k0, std::size_t kc, std::size_t j0, std::size_t n, std::size_t nr,
                  float* dst) {
  const auto& s = *static_cast<const StridedB*>(ctx);
  const std::size_t panels = ceil_div(n, nr);
  if (s.trans) {  // stored N x K: rows of the stored matrix become panel columns
    for (std::size_t p = 0; p < panels; ++p)
      s.kernels->pack_kmajor(s.b + (j0 + p * nr) * s.ldb + k0, s.ldb, std::min(nr, n - p * nr), nr, kc,
                             dst + p * kc * nr);
    return;
  }
  // Row by row, all panels: each B row is read once, front to back (kind to the TLB when B is wide).
  const std::size_t full = n / nr;
  for (std::size_t k = 0; k < kc; ++k) {
    const float* row = s.b + (k0 + k) * s.ldb + j0;
    for (std::size_t p = 0; p < full; ++p) {  // nr is a multiple of 4: inline SSE copies, no memcpy call
      const float* in = row + p * nr;
      float* out = dst + (p * kc + k) * nr;
      for (std::size_t x = 0; x < nr; x += 4) _mm_storeu_ps(out + x, _mm_loadu_ps(in + x));
    }
    if (full < panels) {
      const std::size_t w = n - full * nr;
      float* out = dst + (full * kc + k) * nr;
      std::memcpy(out, row + full * nr, w * sizeof(float));
      std::fill(out + w, out + nr, 0.f);
    }
  }
}

// A rows [i0, i0 + mc), K steps [k0, k0 + kc) into one panel per micro-row of `split`: panel t
// holds kc groups of mr floats at dst + t * mr * kc (rows past the micro-row zero-padded).
void pack_a(const GemmKernels& g, const GemmProblem& p, std::size_t mr, const RowSplit& split, std::size_t i0,
            std::size_t k0, std::size_t kc, float* dst) {
  for (std::size_t t = 0; t < split.count; ++t) {
    const std::size_t r = split.first(t), m = split.rows(t);
    float* d = dst + t * mr * kc;
    if (p.trans_a) {
      const float* src = p.a + k0 * p.lda + i0 + r;
      if (m == mr && mr % 4 == 0) {  // full panel: inline SSE copies (a memcpy call per k step costs more)
        for (std::size_t k = 0; k < kc; ++k)
          for (std::size_t x = 0; x < mr; x += 4) _mm_storeu_ps(d + k * mr + x, _mm_loadu_ps(src + k * p.lda + x));
        continue;
      }
      for (std::size_t k = 0; k < kc; ++k) {
        for (std::size_t x = 0; x < m; ++x) d[k * mr + x] = src[k * p.lda + x];
        for (std::size_t x = m; x < mr; ++x) d[k * mr + x] = 0.f;
      }
      continue;
    }
    g.pack_kmajor(p.a + (i0 + r) * p.lda + k0, p.lda, m, mr, kc, d);
  }
}

// Where the B micro-panels of a tile come from:
//  - Packed: whole-matrix panels (layout in gemm_driver.h), packed beforehand or by pack_b().
//  - InPlace: a row-major B read directly (row stride ldb); only the partial last panel is
//    packed, since reading a whole panel there would run past the matrix.
//  - PerTile: each tile packs the panels of its own columns for each K block, while they are
//    about to be used (no separate pass over memory); for problems with a single row of tiles.
struct PanelView {
  enum class Mode { Packed, InPlace, PerTile } mode = Mode::Packed;
  const float* base = nullptr;  // Packed: panels of columns [j0, ...)
  std::size_t j0 = 0, npad = 0, nr = 0;
  const float* direct = nullptr;  // InPlace
  std::size_t ldb = 0;
  const BSource* source = nullptr;  // InPlace, PerTile
};

// One tile of C: rows [i0, i0 + mc) x columns [j0, j0 + nc), all of K. A row-major op(A) is
// read in place by the micro-kernels; a transposed one is packed per K block.
void compute_tile(const KernelTable& kt, const GemmProblem& p, const PanelView& view, std::size_t i0, std::size_t mc,
                  std::size_t j0, std::size_t nc) {
  using Mode = PanelView::Mode;
  const GemmKernels& g = kt.gemm;
  const GemmDirectKernels* direct = p.trans_a ? nullptr : &direct_kernels(kt.isa);
  const auto mr = static_cast<std::size_t>(g.mr), nr = static_cast<std::size_t>(g.nr);
  const auto kcmax = static_cast<std::size_t>(g.kc), vec = static_cast<std::size_t>(kt.vec);
  const Epilogue* ep = p.ep;
  const Unary* act = ep != nullptr && ep->act.op != UnaryOp::Identity ? &ep->act : nullptr;
  const Unary* rows_act = act_in_registers(act) ? nullptr : act;  // applied to whole tile rows at the end
  const std::size_t kcap = std::min(kcmax, p.K);
  const RowSplit split(mc, mr);
  const std::size_t a_floats = direct != nullptr ? 0 : split.count * mr * kcap;
  const std::size_t b_floats = view.mode == Mode::PerTile   ? round_up(nc, nr) * kcap
                               : view.mode == Mode::InPlace ? nr * kcap
                                                            : 0;
  Scratch buf(a_floats + b_floats);
  float* apack = buf.data();
  float* bpack = buf.data() + a_floats;  // PerTile panels, or InPlace's partial panel

  for (std::size_t k0 = 0; k0 < p.K; k0 += kcmax) {
    const std::size_t kc = std::min(kcmax, p.K - k0);
    const bool last = k0 + kc == p.K;
    if (direct == nullptr) pack_a(g, p, mr, split, i0, k0, kc, apack);
    if (view.mode == Mode::PerTile) view.source->pack(view.source->ctx, k0, kc, j0, nc, nr, bpack);
    TileEpilogue base;
    base.alpha = p.alpha;
    base.beta = k0 == 0 ? p.beta : 1.f;
    if (last && rows_act == nullptr) base.act = act;
    auto activate = [&](std::size_t i, std::size_t m) {
      if (!last || rows_act == nullptr) return;
      activate_rows(kt, *rows_act, p.c, p.ldc, i, m, j0, nc);
    };
    // The B micro-panel of columns [j, j + n) for this K block, and its k stride.
    auto panel = [&](std::size_t j, std::size_t n, std::size_t& ldb) -> const float* {
      ldb = nr;
      if (view.mode == Mode::Packed) return view.base + k0 * view.npad + ((j - view.j0) / nr) * kc * nr;
      if (view.mode == Mode::PerTile) return bpack + (j - j0) * kc;
      if (n == nr) {
        ldb = view.ldb;
        return view.direct + k0 * view.ldb + j;
      }
      view.source->pack(view.source->ctx, k0, kc, j, n, nr, bpack);
      return bpack;
    };
    auto micro = [&](std::size_t t, std::size_t j, std::size_t n, const float* bp, std::size_t ldb) {
      const std::size_t i = i0 + split.first(t), m = split.rows(t), v = ceil_div(n, vec);
      TileEpilogue e = base;
      if (last && ep != nullptr && ep->bias_kind == Bias::PerRow) e.bias_row = ep->bias + i;
      if (last && ep != nullptr && ep->bias_kind == Bias::PerCol) e.bias_col = ep->bias + j;
      float* c = p.c + i * p.ldc + j;
      if (direct != nullptr) {
        direct->ukernel[m - 1][v - 1](kc, p.a + i * p.lda + k0, p.lda, bp, ldb, c, p.ldc, n, e);
      } else {
        g.ukernel[m - 1][v - 1](kc, apack + t * mr * kc, bp, ldb, c, p.ldc, n, e);
      }
    };
    if (view.mode == Mode::InPlace || mc <= kPanelOuterMaxRows) {
      std::size_t j = j0;
      // A tile of one or two rows takes several full panels per call (more independent sums).
      const GemmUKernelWide wide = direct != nullptr && mc <= 2 ? direct->wide[mc - 1] : nullptr;
      if (wide != nullptr) {
        const std::size_t span = static_cast<std::size_t>(direct->wide_panels) * nr;
        const std::size_t pstride = view.mode == Mode::InPlace ? nr : kc * nr;
        for (; j + span <= j0 + nc; j += span) {
          std::size_t ldb = nr;
          const float* bp = panel(j, nr, ldb);
          TileEpilogue e = base;
          if (last && ep != nullptr && ep->bias_kind == Bias::PerRow) e.bias_row = ep->bias + i0;
          if (last && ep != nullptr && ep->bias_kind == Bias::PerCol) e.bias_col = ep->bias + j;
          wide(kc, p.a + i0 * p.lda + k0, p.lda, bp, ldb, pstride, p.c + i0 * p.ldc + j, p.ldc, e);
        }
      }
      for (; j < j0 + nc; j += nr) {
        const std::size_t n = std::min(nr, j0 + nc - j);
        std::size_t ldb = nr;
        const float* bp = panel(j, n, ldb);
        for (std::size_t t = 0; t < split.count; ++t) micro(t, j, n, bp, ldb);
      }
      activate(i0, mc);
    } else {
      for (std::size_t t = 0; t < split.count; ++t) {
        for (std::size_t j = j0; j < j0 + nc; j += nr) {
          const std::size_t n = std::min(nr, j0 + nc - j);
          std::size_t ldb = nr;
          const float* bp = panel(j, n, ldb);
          micro(t, j, n, bp, ldb);
        }
        activate(i0 + split.first(t), split.rows(t));
      }
    }
  }
}

void compute_region(const KernelTable& kt, const GemmProblem& p, const PanelView& panels, std::size_t j0,
                    std::size_t width, bool parallel) {
  const std::size_t threads = parallel ? static_cast<std::size_t>(max_threads()) : 1;
  std::size_t tm = 0, tn = 0;
  const auto nr = static_cast<std::size_t>(kt.gemm.nr);
  choose_tiles(p.M, width, static_cast<std::size_t>(kt.gemm.mr), nr, threads, tm, tn,
               gemm_tile_cols(static_cast<std::size_t>(kt.gemm.kc), nr));
  const std::size_t mt = ceil_div(p.M, tm), nt = ceil_div(width, tn);
  parallel_each(mt * nt, parallel, [&](std::size_t t) {
    const std::size_t i0 = (t % mt) * tm, jj = j0 + (t / mt) * tn;
    compute_tile(kt, p, panels, i0, std::min(tm, p.M - i0), jj, std::min(tn, j0 + width - jj));
  });
}

// C = act(beta * C + bias) when there is no product to add.
void scale_only(const KernelTable& kt, const GemmProblem& p) {
  const Epilogue* ep = p.ep;
  for (std::size_t i = 0; i < p.M; ++i) {
    float* row = p.c + i * p.ldc;
    for (std::size_t j = 0; j < p.N; ++j) {
      float v = p.beta == 0.f ? 0.f : p.beta * row[j];
      if (ep != nullptr && ep->bias_kind == Bias::PerRow) v += ep->bias[i];
      if (ep != nullptr && ep->bias_kind == Bias::PerCol) v += ep->bias[j];
      row[j] = v;
    }
    if (ep != nullptr && ep->act.op != UnaryOp::Identity) kt.unary(ep->act, row, row, p.N);
  }
}

}  // namespace

void choose_tiles(std::size_t M, std::size_t N, std::size_t mr, std::size_t nr, std::size_t threads, std::size_t& tm,
                  std::size_t& tn, std::size_t max_cols) {
  const std::size_t mb = ceil_div(M, mr), nb = ceil_div(N, nr);
  std::size_t tmb = std::min(mb, std::max<std::size_t>(1, ceil_div(kTileRows, mr)));
  std::size_t tnb = std::min(nb, std::max<std::size_t>(1, (max_cols != 0 ? max_cols : kTileCols) / nr));
  while (ceil_div(mb, tmb) * ceil_div(nb, tnb) < threads) {
    if (tmb > 1 && (tmb * mr * 3 >= tnb * nr || tnb == 1)) {
      tmb = ceil_div(tmb, 2);
    } else if (tnb > 1) {
      tnb = ceil_div(tnb, 2);
    } else {
      break;
    }
  }
  tmb = ceil_div(mb, ceil_div(mb, tmb));
  tnb = ceil_div(nb, ceil_div(nb, tnb));
  // A few tiles whose count is not a multiple of the threads leave threads idle at the end
  // (5 equal tiles on 2 threads take 3 tile times: ResNet's 56x56 convs, 64 rows x 68 panels):
  // cut the columns into more, narrower tiles until the count divides evenly. Not for 1-2 rows,
  // whose wide kernels take 3 panels at a time.
  const std::size_t mt = ceil_div(mb, tmb);
  if (threads > 1 && M > 2 && mt * ceil_div(nb, tnb) < 4 * threads && (mt * ceil_div(nb, tnb)) % threads != 0) {
    for (std::size_t nt = ceil_div(nb, tnb) + 1; nt <= nb && mt * nt <= 8 * threads; ++nt) {
      const std::size_t w = ceil_div(nb, nt);
      if (ceil_div(nb, w) == nt && (mt * nt) % threads == 0) {
        tnb = w;
        break;
      }
    }
  }
  tm = tmb * mr;
  tn = tnb * nr;
}

BSource strided_b_source(const StridedB& b) {
  BSource s{&pack_strided, &b};
  if (!b.trans) s.direct = b.b, s.direct_ld = b.ldb;
  return s;
}

void pack_b_columns(const GemmKernels& g, const BSource& b, std::size_t K, std::size_t j0, std::size_t width,
                    float* dst, bool parallel) {
  const auto nr = static_cast<std::size_t>(g.nr), kcmax = static_cast<std::size_t>(g.kc);
  const std::size_t panels = ceil_div(width, nr), blocks = ceil_div(K, kcmax), npad = panels * nr;
  // Tasks of up to kPackGroupPanels panels of one K block: a row-major B is then read in runs
  // of a few KB per row instead of one panel width.
  const std::size_t groups = ceil_div(panels, kPackGroupPanels);
  parallel_each(blocks * groups, parallel && K * width >= 65536, [&](std::size_t t) {
    const std::size_t q = t / groups, pi = (t % groups) * kPackGroupPanels;
    const std::size_t k0 = q * kcmax, kc = std::min(kcmax, K - k0), j = pi * nr;
    b.pack(b.ctx, k0, kc, j0 + j, std::min(kPackGroupPanels * nr, width - j), nr, dst + k0 * npad + pi * kc * nr);
  });
}

void gemm_run(const KernelTable& kt, const GemmProblem& p, bool parallel) {
  if (p.M == 0 || p.N == 0) return;
  if (p.K == 0 || p.alpha == 0.f) {
    scale_only(kt, p);
    return;
  }
  const auto nr = static_cast<std::size_t>(kt.gemm.nr);
  PanelView view;
  view.nr = nr;
  if (p.packed_b != nullptr) {
    view.base = p.packed_b, view.npad = round_up(p.N, nr);
    compute_region(kt, p, view, 0, p.N, parallel);
    return;
  }
  view.source = &p.b;
  const auto mr = static_cast<std::size_t>(kt.gemm.mr);
  if (p.M <= round_up(kOneRowMaxRows, mr)) {  // one row of tiles: B panels are used by one tile only
    // One or two rows run the wide kernels, which read several panels' worth of each B row at
    // once: packing B would cost more than the product itself, however wide B is.
    if (p.b.direct != nullptr && (p.b.direct_ld <= kInPlaceMaxLd || (p.M <= 2 && !p.trans_a))) {
      view.mode = PanelView::Mode::InPlace, view.direct = p.b.direct, view.ldb = p.b.direct_ld;
    } else {
      view.mode = PanelView::Mode::PerTile;
    }
    compute_region(kt, p, view, 0, p.N, parallel);
    return;
  }
  const std::size_t blocks = ceil_div(p.K * round_up(p.N, nr), kPackBudgetFloats);
  const std::size_t width_max = round_up(ceil_div(p.N, blocks), nr);
  Scratch bpack(p.K * width_max);
  for (std::size_t j0 = 0; j0 < p.N; j0 += width_max) {
    const std::size_t width = std::min(width_max, p.N - j0);
    pack_b_columns(kt.gemm, p.b, p.K, j0, width, bpack.data(), parallel);
    view.base = bpack.data(), view.j0 = j0, view.npad = round_up(width, nr);
    compute_region(kt, p, view, j0, width, parallel);
  }
}

}  // namespace detail

namespace {

void check_ld(const char* name, std::size_t ld, std::size_t rows, std::size_t cols) {
  if (rows > 0 && cols > 0 && ld < cols)
    throw std::invalid_argument("simd::gemm: " + std::string(name) + " = " + std::to_string(ld) +
                                " is smaller than the row length " + std::to_string(cols));
}

void check_epilogue(const Epilogue& ep) {
  if (ep.bias_kind != Bias::None && ep.bias == nullptr)
    throw std::invalid_argument("simd::gemm: epilogue has a bias kind but a null bias pointer");
}

detail::GemmProblem make_problem(bool trans_a, std::size_t M, std::size_t N, std::size_t K, float alpha, const float* A,
                                 std::size_t lda, float beta, float* C, std::size_t ldc, const Epilogue& ep) {
  check_ld("lda", lda, trans_a ? K : M, trans_a ? M : K);
  check_ld("ldc", ldc, M, N);
  check_epilogue(ep);
  detail::GemmProblem p;
  p.M = M, p.N = N, p.K = K, p.alpha = alpha, p.beta = beta;
  p.a = A, p.lda = lda, p.trans_a = trans_a;
  p.c = C, p.ldc = ldc;
  p.ep = &ep;
  return p;
}

}  // namespace

void PackedB::Free::operator()(float* p) const noexcept { detail::aligned_free(p); }

void gemm(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, float alpha, const float* A,
          std::size_t lda, const float* B, std::size_t ldb, float beta, float* C, std::size_t ldc, const Epilogue& ep) {
  detail::GemmProblem p = make_problem(trans_a, M, N, K, alpha, A, lda, beta, C, ldc, ep);
  check_ld("ldb", ldb, trans_b ? N : K, trans_b ? K : N);
  const detail::KernelTable& kt = detail::active_table();  // read once: packing and kernels must agree
  const detail::StridedB sb{B, ldb, trans_b, &kt.gemm};
  p.b = detail::strided_b_source(sb);
  detail::gemm_run(kt, p, true);
}

PackedB pack_b(bool trans_b, std::size_t K, std::size_t N, const float* B, std::size_t ldb) {
  check_ld("ldb", ldb, trans_b ? N : K, trans_b ? K : N);
  const detail::KernelTable& kt = detail::active_table();
  const auto nr = static_cast<std::size_t>(kt.gemm.nr);
  PackedB out;
  out.k_ = K;
  out.n_ = N;
  out.isa_ = kt.isa;
  out.floats_ = K * ((N + nr - 1) / nr) * nr;
  out.data_.reset(detail::aligned_alloc_floats(out.floats_));
  if (out.floats_ > 0) {
    const detail::StridedB sb{B, ldb, trans_b, &kt.gemm};
    detail::pack_b_columns(kt.gemm, detail::strided_b_source(sb), K, 0, N, out.data_.get(), true);
  }
  return out;
}

void gemm_packed(bool trans_a, std::size_t M, float alpha, const float* A, std::size_t lda, const PackedB& B,
                 float beta, float* C, std::size_t ldc, const Epilogue& ep) {
  if (B.empty()) throw std::invalid_argument("simd::gemm_packed: B was never packed");
  detail::GemmProblem p = make_problem(trans_a, M, B.n(), B.k(), alpha, A, lda, beta, C, ldc, ep);
  p.packed_b = B.data();
  detail::gemm_run(detail::table_for(B.isa()), p, true);
}

void gemm_batched(std::size_t batch, bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K,
                  float alpha, const float* A, std::size_t lda, const float* B, std::size_t ldb, float beta, float* C,
                  std::size_t ldc, BatchStrides s, const Epilogue& ep) {
  if (batch == 0) return;
  // Shared B and evenly spaced A/C rows: one GEMM with batch * M rows packs B only once.
  const bool merge = s.b == 0 && !trans_a && s.a == M * lda && s.c == M * ldc && ep.bias_kind != Bias::PerRow;
  if (merge || batch == 1) {
    gemm(trans_a, trans_b, merge ? batch * M : M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep);
    return;
  }
  detail::GemmProblem p = make_problem(trans_a, M, N, K, alpha, A, lda, beta, C, ldc, ep);
  check_ld("ldb", ldb, trans_b ? N : K, trans_b ? K : N);
  const detail::KernelTable& kt = detail::active_table();
  detail::run_problems(batch, 2.0 * M * N * K, [&](std::size_t i, bool parallel) {
    detail::GemmProblem q = p;
    q.a = A + i * s.a;
    q.c = C + i * s.c;
    const detail::StridedB sb{B + i * s.b, ldb, trans_b, &kt.gemm};
    q.b = detail::strided_b_source(sb);
    detail::gemm_run(kt, q, parallel);
  });
}

void gemm_batched(std::size_t batch, bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K,
                  float alpha, const float* const* A, std::size_t lda, const float* const* B, std::size_t ldb,
                  float beta, float* const* C, std::size_t ldc, const Epilogue& ep) {
  if (batch == 0) return;
  detail::GemmProblem p = make_problem(trans_a, M, N, K, alpha, nullptr, lda, beta, nullptr, ldc, ep);
  check_ld("ldb", ldb, trans_b ? N : K, trans_b ? K : N);
  const detail::KernelTable& kt = detail::active_table();
  detail::run_problems(batch, 2.0 * M * N * K, [&](std::size_t i, bool parallel) {
    detail::GemmProblem q = p;
    q.a = A[i];
    q.c = C[i];
    const detail::StridedB sb{B[i], ldb, trans_b, &kt.gemm};
    q.b = detail::strided_b_source(sb);
    detail::gemm_run(kt, q, parallel);
  });
}

}  // namespace onnxforge::simd

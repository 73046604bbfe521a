// Channels-last convolution: y [P = N*OH*OW pixels, M] = x * W as one GEMM.
//  - Pointwise (1x1, stride 1, no pads): x [P, C] is A itself, read in place by gemm_packed(),
//    except where the implicit GEMM's 64-column panels fit M better (below).
//  - Everything else: an implicit ("indirect") GEMM. K = KH*KW*C in (kh, kw, c) order; A is
//    never built: for each tile row (an output pixel) and kernel tap, a pointer to the input
//    pixel's C channels (or to zeros in the padding), and the indirect micro-kernels
//    (kernels/gemm.inl) read A rows through them, one segment per tap, the sums staying in
//    registers across all the segments of a K block. The K blocks never split a tap unevenly:
//    whole kernel rows per block where KW * C <= kc (then a tile row whose kernel rows lie
//    inside the input reads each kernel row as one segment of KW * C floats), else whole taps
//    where C <= kc, else each tap cut into ceil(C / kc) near-equal chunks (one segment per
//    block). B is packed once with exactly these blocks in the GEMM's panel layout, 48 or 64
//    columns wide on AVX-512 (whichever pads fewer columns).
//  - An NCHW input (x_nchw) is transposed to NHWC into scratch memory first.
// The arithmetic per output element is the same whatever the tiling: the same bits at any
// thread count.
#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>

#include "simd/detail/conv_direct.h"
#include "simd/detail/conv_fewc.h"
#include "simd/detail/gemm_driver.h"
#include "simd/detail/parallel.h"
#include "simd/detail/scratch.h"
#include "simd/kernels/gemm_direct.h"
#include "simd/nhwc.h"
#include "simd/transpose.h"

namespace onnxforge::simd {
namespace {

using detail::ceil_div;

[[noreturn]] void fail(const char* fn, const std::string& what) {
  throw std::invalid_argument(std::string("simd::") + fn + ": " + what);
}

void validate(const char* fn, const ConvParams& p) {
  if (p.rank != 2) fail(fn, "needs a 2-D conv, got rank " + std::to_string(p.rank));
  if (p.group != 1) fail(fn, "needs group 1, got " + std::to_string(p.group));
  if (p.batch < 0 || p.in_channels < 0 || p.out_channels < 0) fail(fn, "negative batch or channel count");
  for (int i = 0; i < 2; ++i) {
    if (p.in[i] < 0) fail(fn, "negative input size");
    if (p.kernel[i] < 1 || p.stride[i] < 1 || p.dilation[i] < 1) fail(fn, "kernel, stride and dilation must be >= 1");
    if (p.pad_begin[i] < 0 || p.pad_end[i] < 0) fail(fn, "negative padding");
  }
}

bool is_pointwise(const ConvParams& p) {
  for (int i = 0; i < 2; ++i)
    if (p.kernel[i] != 1 || p.stride[i] != 1 || p.pad_begin[i] != 0 || p.pad_end[i] != 0) return false;
  return true;
}

// What the packing depends on (all but the batch and the input size).
bool same_conv(const ConvParams& a, const ConvParams& b) {
  for (int i = 0; i < 2; ++i)
    if (a.kernel[i] != b.kernel[i] || a.stride[i] != b.stride[i] || a.dilation[i] != b.dilation[i] ||
        a.pad_begin[i] != b.pad_begin[i] || a.pad_end[i] != b.pad_end[i])
      return false;
  return a.rank == b.rank && a.group == b.group && a.in_channels == b.in_channels && a.out_channels == b.out_channels;
}

const detail::GemmIndirectKernels& indirect_kernels(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return detail::avx512::gemm_indirect_kernels();
    case Isa::Avx2: return detail::avx2::gemm_indirect_kernels();
    case Isa::Sse: break;
  }
  return detail::sse::gemm_indirect_kernels();
}

// One K block: `taps` segments of `len` channels from channel c0 of taps [tap0, tap0 + taps).
// `rows`: the block is whole kernel rows (taps a multiple of KW, tap0 too) whose taps lie side
// by side in the input (dilation 1 across): a tile row whose kernel rows are all inside the
// input horizontally then reads each kernel row as one segment of KW * C floats instead.
struct KBlock {
  std::size_t k0, kc, tap0, taps, c0, len;
  bool rows;
};

std::vector<KBlock> k_blocks(std::size_t C, std::size_t KH, std::size_t KW, bool contiguous_rows, std::size_t kcmax) {
  std::vector<KBlock> blocks;
  const std::size_t T = KH * KW;
  if (C == 0 || T == 0) return blocks;
  // Near-equal counts of `unit` taps per block (whole kernel rows where they fit a block).
  auto whole = [&](std::size_t unit, bool rows) {
    const std::size_t units = T / unit, per = kcmax / (unit * C), count = ceil_div(units, per);
    for (std::size_t b = 0, u = 0; b < count; ++b) {
      const std::size_t n = units / count + (b < units % count ? 1 : 0);
      blocks.push_back({u * unit * C, n * unit * C, u * unit, n * unit, 0, C, rows});
      u += n;
    }
  };
  if (KW * C <= kcmax) {
    whole(KW, contiguous_rows && KW > 1);
  } else if (C <= kcmax) {
    whole(1, false);
  } else {
    const std::size_t chunks = ceil_div(C, kcmax);
    for (std::size_t tap = 0; tap < T; ++tap)
      for (std::size_t q = 0, c0 = 0; q < chunks; ++q) {
        const std::size_t len = C / chunks + (q < C % chunks ? 1 : 0);
        blocks.push_back({tap * C + c0, len, tap, 1, c0, len, false});
        c0 += len;
      }
  }
  return blocks;
}

std::vector<KBlock> k_blocks(const ConvParams& p, std::size_t kcmax) {
  return k_blocks(static_cast<std::size_t>(p.in_channels), static_cast<std::size_t>(p.kernel[0]),
                  static_cast<std::size_t>(p.kernel[1]), p.dilation[1] == 1, kcmax);
}

struct Geometry {
  std::size_t N, H, W, C, M, OH, OW, KH, KW, T, P;
  std::int64_t SH, SW, DH, DW, PT, PL;
};

Geometry geometry(const ConvParams& p) {
  Geometry g{};
  const auto u = [](std::int64_t v) { return static_cast<std::size_t>(std::max<std::int64_t>(v, 0)); };
  g.N = u(p.batch), g.H = u(p.in[0]), g.W = u(p.in[1]), g.C = u(p.in_channels), g.M = u(p.out_channels);
  g.OH = u(p.out(0)), g.OW = u(p.out(1)), g.KH = u(p.kernel[0]), g.KW = u(p.kernel[1]);
  g.T = g.KH * g.KW, g.P = g.N * g.OH * g.OW;
  g.SH = p.stride[0], g.SW = p.stride[1], g.DH = p.dilation[0], g.DW = p.dilation[1];
  g.PT = p.pad_begin[0], g.PL = p.pad_begin[1];
  return g;
}

// One tile: output pixels [i0, i0 + mc) x output channels [j0, j0 + nc), all of K. Per K
// block the micro-rows run outer, each micro-row's input pixels staying in L1 while the
// block's B panels stream from L2 (measured on ResNet-50's 3x3 convs against the B panels
// outer, as gemm.cpp runs short tiles: as fast for the 56x56 to 14x14 maps, about 5% faster
// for the 7x7 maps' 49-row tiles).
void igemm_tile(const detail::GemmIndirectKernels::Panel& ik, const Geometry& g, const std::vector<KBlock>& blocks,
                const ConvNhwcWeights& w, const float* x, const float* zeros, const float* bias, float* y,
                const Unary* act, bool accumulate, std::size_t mr, std::size_t vec, std::size_t i0, std::size_t mc,
                std::size_t j0, std::size_t nc) {
  const std::size_t nr = w.nr, npad = ceil_div(g.M, nr) * nr, T = g.T;
  const detail::RowSplit split(mc, mr);
  // Row pointers: micro-row t's block starts at split.first(t) * (T + KH), [tap][row] for the
  // taps, then [kernel row][row] for whole kernel rows (used when `whole_rows[t]`).
  const std::size_t stride = T + g.KH;
  detail::Scratch buf(2 * mc * stride + split.count + 16);
  auto** ptrs = reinterpret_cast<const float**>(buf.data());
  auto* whole_rows = reinterpret_cast<unsigned char*>(ptrs + mc * stride);
  const auto H = static_cast<std::int64_t>(g.H), W = static_cast<std::int64_t>(g.W);
  const std::int64_t span = static_cast<std::int64_t>(g.KW - 1) * g.DW;
  for (std::size_t t = 0; t < split.count; ++t) {
    const std::size_t r0 = split.first(t), m = split.rows(t);
    const float** dst = ptrs + r0 * stride;
    const float** rows = dst + T * m;
    bool inside_w = true;
    for (std::size_t i = 0; i < m; ++i) {
      const std::size_t q = i0 + r0 + i, n = q / (g.OH * g.OW), rem = q % (g.OH * g.OW);
      const auto oh = static_cast<std::int64_t>(rem / g.OW), ow = static_cast<std::int64_t>(rem % g.OW);
      const float* img = x + n * g.H * g.W * g.C;
      const std::int64_t iw0 = ow * g.SW - g.PL;
      inside_w = inside_w && iw0 >= 0 && iw0 + span < W;
      for (std::size_t kh = 0; kh < g.KH; ++kh) {
        const std::int64_t ih = oh * g.SH - g.PT + static_cast<std::int64_t>(kh) * g.DH;
        const float* row = ih >= 0 && ih < H ? img + static_cast<std::size_t>(ih) * g.W * g.C : nullptr;
        const bool whole = row != nullptr && iw0 >= 0 && iw0 + span < W;
        rows[kh * m + i] = whole ? row + static_cast<std::size_t>(iw0) * g.C : zeros;
        for (std::size_t kw = 0; kw < g.KW; ++kw) {
          const std::int64_t iw = iw0 + static_cast<std::int64_t>(kw) * g.DW;
          dst[(kh * g.KW + kw) * m + i] =
              row != nullptr && iw >= 0 && iw < W ? row + static_cast<std::size_t>(iw) * g.C : zeros;
        }
      }
    }
    whole_rows[t] = inside_w ? 1 : 0;
  }
  const float* base = w.igemm.get();
  const Unary* rows_act = detail::act_in_registers(act) ? nullptr : act;  // applied to whole tile rows
  const detail::KernelTable& kt = detail::table_for(w.isa);
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    const KBlock& kb = blocks[b];
    const bool last = b + 1 == blocks.size();
    detail::TileEpilogue e;
    e.beta = b == 0 && !accumulate ? 0.f : 1.f;
    if (last && rows_act == nullptr) e.act = act;
    auto call = [&](std::size_t t, std::size_t j) {
      const std::size_t n = std::min(nr, j0 + nc - j), v = ceil_div(n, vec);
      const float* bp = base + kb.k0 * npad + (j / nr) * kb.kc * nr;
      detail::TileEpilogue ee = e;
      if (last && bias != nullptr) ee.bias_col = bias + j;
      const std::size_t r0 = split.first(t), m = split.rows(t);
      float* c = y + (i0 + r0) * g.M + j;
      const float* const* tp = ptrs + r0 * stride;
      if (kb.rows && whole_rows[t] != 0) {
        ik.ukernel[m - 1][v - 1](kb.taps / g.KW, g.KW * g.C, tp + (T + kb.tap0 / g.KW) * m, 0, bp, c, g.M, n, ee);
      } else {
        ik.ukernel[m - 1][v - 1](kb.taps, kb.len, tp + kb.tap0 * m, kb.c0, bp, c, g.M, n, ee);
      }
    };
    for (std::size_t t = 0; t < split.count; ++t) {
      for (std::size_t j = j0; j < j0 + nc; j += nr) call(t, j);
      if (last && rows_act != nullptr)
        detail::activate_rows(kt, *rows_act, y, g.M, i0 + split.first(t), split.rows(t), j0, nc);
    }
  }
}

void igemm(const ConvParams& p, const Geometry& g, const ConvNhwcWeights& w, const float* x, const float* bias,
           float* y, const Unary& act, bool accumulate) {
  const detail::KernelTable& kt = detail::table_for(w.isa);
  const detail::GemmIndirectKernels::Panel& panel = indirect_kernels(w.isa).panels[w.panel];
  const std::vector<KBlock> blocks = k_blocks(p, w.kc);
  detail::Scratch zeros(g.KW * g.C + 16);  // a whole kernel row's worth
  std::fill(zeros.data(), zeros.data() + g.KW * g.C + 16, 0.f);
  const auto mr = static_cast<std::size_t>(panel.mr), vec = static_cast<std::size_t>(kt.vec);
  const Unary* a = act.op == UnaryOp::Identity ? nullptr : &act;
  std::size_t tm = 0, tn = 0;
  detail::choose_tiles(g.P, g.M, mr, w.nr, static_cast<std::size_t>(detail::max_threads()), tm, tn);
  const std::size_t mt = ceil_div(g.P, tm), nt = ceil_div(g.M, tn);
  detail::parallel_each(mt * nt, true, [&](std::size_t t) {
    const std::size_t i0 = (t % mt) * tm, j0 = (t / mt) * tn;
    igemm_tile(panel, g, blocks, w, x, zeros.data(), bias, y, a, accumulate, mr, vec, i0, std::min(tm, g.P - i0), j0,
               std::min(tn, g.M - j0));
  });
}

// y = act(bias (+ y)) when there is nothing to sum (no input channels).
void bias_only(const Geometry& g, Isa isa, const float* bias, float* y, const Unary& act, bool accumulate) {
  const detail::KernelTable& kt = detail::table_for(isa);
  for (std::size_t q = 0; q < g.P; ++q) {
    float* row = y + q * g.M;
    for (std::size_t j = 0; j < g.M; ++j) row[j] = (accumulate ? row[j] : 0.f) + (bias != nullptr ? bias[j] : 0.f);
    if (act.op != UnaryOp::Identity) kt.unary(act, row, row, g.M);
  }
}

// 3x3 convs on maps of at most 16 x 16 outputs run the NCHW direct kernel between two
// transposes (of at most 256 pixels, a few microseconds). In ResNet-50 at 2 threads (profiles
// of both layouts alternating), the implicit GEMM took 0.1-0.4 ms longer on each of layer3's
// 3x3 convs and 0.5-0.7 ms longer on layer4's; ISNet's 16 x 16 stage (512 channels, 2 threads,
// alternating) took 12-22% longer in the implicit GEMM.
constexpr std::int64_t kDirectMaxPixels = 256;
// With at least 256 input channels (K >= 2304, split into many K blocks that each pass over the
// output tile again), up to 32 x 32: ISNet's 32 x 32 stage (256-512 channels), per-node sums
// of its 14 convs alternating the two routes in one binary, 9 pairs at 1 and 2 threads: the
// direct kernel faster in 7, by 10% at the median (load 8).
constexpr std::int64_t kDirectMaxPixelsDeep = 1024, kDirectDeepChannels = 256;

bool direct_on_small_map(const ConvParams& p) {
  return detail::conv_direct_routed(p) &&
         (p.out_spatial() <= kDirectMaxPixels ||
          (p.out_spatial() <= kDirectMaxPixelsDeep && p.in_channels >= kDirectDeepChannels));
}
// y (NHWC) = the direct kernel's result, run on NCHW copies of x (and of y's residual).
void direct_between_transposes(const ConvParams& p, const float* x, bool x_nchw, const ConvNhwcWeights& w,
                               const float* bias, float* y, const Unary& act, bool accumulate) {
  const std::int64_t N = p.batch, C = p.in_channels, M = p.out_channels, HW = p.in[0] * p.in[1], OHW = p.out_spatial();
  detail::Scratch xs(x_nchw ? 1 : static_cast<std::size_t>(N * C * HW)), ys(static_cast<std::size_t>(N * M * OHW));
  if (!x_nchw) {
    nhwc_to_nchw(N, C, HW, x, xs.data());
    x = xs.data();
  }
  if (accumulate) nhwc_to_nchw(N, M, OHW, y, ys.data());
  detail::conv_direct(p, x, w.direct.data(), bias, ys.data(), act, accumulate);
  nchw_to_nhwc(N, M, OHW, ys.data(), y);
}

// Few output channels (segmentation side outputs: ISNet's 64 -> 1 at 512 x 512): per output
// pixel, the dot products of its taps' channels with each output's weights. The implicit GEMM
// pads the outputs to a whole panel, and the NCHW row-sum kernel needed a transposed copy of the
// input (ISNet's side1 took 38 ms there against ORT's 21, most of it the 64 MiB transpose).
bool few_outputs_fit(const ConvParams& p) {
  return p.out_channels >= 1 && static_cast<std::size_t>(p.out_channels) <= detail::kFewOutputsMax &&
         p.in_channels >= 8 && static_cast<std::size_t>(p.kernel[0] * p.kernel[1]) <= detail::kFewOutputsMaxTaps;
}

void few_outputs(const Geometry& g, const ConvNhwcWeights& w, const float* x, const float* bias, float* y,
                 const Unary& act, bool accumulate) {
  const detail::KernelTable& kt = detail::table_for(w.isa);
  const std::size_t C = g.C, M = g.M, T = g.T, step = static_cast<std::size_t>(g.SW) * C;
  const auto H = static_cast<std::int64_t>(g.H), W = static_cast<std::int64_t>(g.W);
  const auto OW = static_cast<std::int64_t>(g.OW);
  // Columns [lo, hi) read every kw tap inside the row; a run of them moves every tap by `step`.
  std::int64_t lo = 0, hi = OW;
  for (std::size_t kw = 0; kw < g.KW; ++kw) {
    const std::int64_t off = static_cast<std::int64_t>(kw) * g.DW - g.PL;  // iw = ow * SW + off
    lo = std::max(lo, off >= 0 ? std::int64_t{0} : (-off + g.SW - 1) / g.SW);
    hi = std::min(hi, W - off <= 0 ? std::int64_t{0} : (W - off - 1) / g.SW + 1);
  }
  hi = std::max(hi, lo);
  // Taps above or below the input read zeros, moved along with the others over a run.
  const std::size_t zn = static_cast<std::size_t>(hi - lo) * step + C + 16;
  detail::Scratch zeros(zn);
  std::fill(zeros.data(), zeros.data() + zn, 0.f);
  const Unary* a = act.op == UnaryOp::Identity ? nullptr : &act;
  detail::parallel_chunks(g.N * g.OH, 1, [&](std::size_t r0, std::size_t r1) {
    const float* taps[detail::kFewOutputsMaxTaps];
    detail::Scratch tmp(accumulate ? g.OW * M : 1);
    for (std::size_t r = r0; r < r1; ++r) {
      const std::size_t n = r / g.OH;
      const auto oh = static_cast<std::int64_t>(r % g.OH);
      const float* img = x + n * g.H * g.W * C;
      float* yr = y + r * g.OW * M;
      float* out = accumulate ? tmp.data() : yr;
      auto pixel_taps = [&](std::int64_t ow, bool interior) {
        for (std::size_t kh = 0; kh < g.KH; ++kh) {
          const std::int64_t ih = oh * g.SH - g.PT + static_cast<std::int64_t>(kh) * g.DH;
          for (std::size_t kw = 0; kw < g.KW; ++kw) {
            const std::int64_t iw = ow * g.SW - g.PL + static_cast<std::int64_t>(kw) * g.DW;
            const bool in = ih >= 0 && ih < H && (interior || (iw >= 0 && iw < W));
            taps[kh * g.KW + kw] =
                in ? img + (static_cast<std::size_t>(ih) * g.W + static_cast<std::size_t>(iw)) * C : zeros.data();
          }
        }
      };
      for (std::int64_t ow = 0; ow < OW; ++ow) {
        if (ow == lo && hi > lo) {
          pixel_taps(ow, true);
          kt.few_outputs_pixels(taps, T, step, static_cast<std::size_t>(hi - lo), C, w.few.data(), M, bias,
                                out + static_cast<std::size_t>(ow) * M);
          ow = hi - 1;
          continue;
        }
        pixel_taps(ow, false);
        kt.few_outputs_pixels(taps, T, step, 1, C, w.few.data(), M, bias, out + static_cast<std::size_t>(ow) * M);
      }
      // conv + bias first, then the residual, then the activation: the bits of the unfused plan.
      if (accumulate) kt.binary_vv(BinaryOp::Add, out, yr, yr, g.OW * M);
      if (a != nullptr) kt.unary(*a, yr, yr, g.OW * M);
    }
  });
}

// Whether the wide indirect panel leaves fewer padded columns than the GEMM's (64, 128, 256 ...
// output channels); its width in `nr`.
bool wide_panel_fits(Isa isa, std::size_t M, std::size_t gemm_nr, std::size_t vec, std::size_t& nr) {
  const detail::GemmIndirectKernels::Panel& wide = indirect_kernels(isa).panels[1];
  if (wide.nv == 0) return false;
  nr = static_cast<std::size_t>(wide.nv) * vec;
  return ceil_div(M, nr) * nr - M < ceil_div(M, gemm_nr) * gemm_nr - M;
}

// Pointwise convs with more than 64 output channels that the wide panel fits run as implicit
// GEMMs of one tap (the A rows are still the activations, in place). ResNet-50's 1x1 shapes at
// 2 threads, both routes alternating call by call: 128 to 2048 output channels 1-8% faster
// (layer2's 128 -> 512 up to 15%), no more 16-column remainder panel; 64 output channels 3-7%
// slower (a single 64-column panel per micro-row of 6, against 8-row ones).
constexpr std::size_t kPointwiseWideMinM = 65;

// Packed weights of at most this many bytes form a single K block, however long K is: the
// sums then stay in registers across all the taps instead of a second pass over the output,
// and B still fits in L2. ResNet-50 at 2 threads, alternating in one process: layer1's 3x3
// convs (K = 576) 2-4% faster, layer2's 512 -> 128 pointwise convs 3% (one block of 512
// instead of two of 256); 640 KB (layer2's 3x3s, K = 1152) gained nothing more in the model.
constexpr std::size_t kOneBlockMaxBytes = std::size_t{256} << 10;

}  // namespace

bool conv_nhwc_supported(const ConvParams& p) { return p.rank == 2 && p.group == 1; }

bool conv_nhwc_few_outputs(const ConvParams& p) { return conv_nhwc_supported(p) && few_outputs_fit(p); }

ConvNhwcWeights pack_conv_weights_nhwc(const ConvParams& p, const float* w) {
  validate("pack_conv_weights_nhwc", p);
  const detail::KernelTable& kt = detail::active_table();
  const Geometry g = geometry(p);
  ConvNhwcWeights r;
  r.params = p;
  r.isa = kt.isa;
  r.nr = static_cast<std::size_t>(kt.gemm.nr);
  r.kc = static_cast<std::size_t>(kt.gemm.kc);
  std::size_t wnr = 0;
  const bool wide = wide_panel_fits(r.isa, g.M, r.nr, static_cast<std::size_t>(kt.vec), wnr);
  if (few_outputs_fit(p)) {
    r.few.resize(g.M * g.T * g.C);
    for (std::size_t m = 0; m < g.M; ++m)
      for (std::size_t c = 0; c < g.C; ++c)
        for (std::size_t t = 0; t < g.T; ++t) r.few[(m * g.T + t) * g.C + c] = w[(m * g.C + c) * g.T + t];
    return r;
  }
  if (is_pointwise(p) && !(wide && g.M >= kPointwiseWideMinM)) {
    if (g.C > 0 && g.M > 0) r.b = pack_b(true, g.C, g.M, w, g.C);  // w [M][C] is W^T stored transposed
    return r;
  }
  // CNN stems read the NCHW graph input with the direct few-channel kernel (1.5-2x the implicit
  // GEMM, whose K blocks are only C floats deep); the implicit GEMM stays for NHWC inputs.
  if (detail::conv_fewc_routed(p)) r.fewc = detail::pack_conv_fewc(p, w);
  if (direct_on_small_map(p)) {  // the implicit GEMM's copy would never be read
    r.direct = detail::pack_conv_direct(p, w);
    return r;
  }
  if (wide) r.panel = 1, r.nr = wnr;
  const std::size_t nr = r.nr, npad = ceil_div(g.M, nr) * nr, K = g.T * g.C;
  if (K * npad * sizeof(float) <= kOneBlockMaxBytes) r.kc = std::max(r.kc, K);
  float* data = detail::aligned_alloc_floats(std::max<std::size_t>(K * npad, 16));
  r.igemm = std::shared_ptr<const float>(data, [](const float* q) { detail::aligned_free(const_cast<float*>(q)); });
  for (const KBlock& kb : k_blocks(p, r.kc)) {
    for (std::size_t pnl = 0; pnl < npad / nr; ++pnl) {
      float* dst = data + kb.k0 * npad + pnl * kb.kc * nr;
      for (std::size_t k = 0; k < kb.kc; ++k) {
        const std::size_t kk = kb.k0 + k, tap = kk / g.C, c = kk % g.C;
        for (std::size_t col = 0; col < nr; ++col) {
          const std::size_t m = pnl * nr + col;
          dst[k * nr + col] = m < g.M ? w[(m * g.C + c) * g.T + tap] : 0.f;
        }
      }
    }
  }
  return r;
}

void conv_nhwc(const ConvParams& p, const float* x, bool x_nchw, const ConvNhwcWeights& w, const float* bias, float* y,
               const Unary& act, bool accumulate) {
  validate("conv_nhwc", p);
  const bool pointwise = is_pointwise(p);
  const Geometry g = geometry(p);
  if (!same_conv(p, w.params) || w.nr == 0 ||
      (w.few.empty() && ((!pointwise && w.igemm == nullptr && w.direct.empty()) ||
                         (pointwise && g.C > 0 && g.M > 0 && w.b.empty() && w.igemm == nullptr))))
    fail("conv_nhwc", "the weights were packed for other parameters");
  if (g.P == 0 || g.M == 0) return;
  if (g.C == 0) {
    bias_only(g, w.isa, bias, y, act, accumulate);
    return;
  }
  if (x_nchw && !w.fewc.empty()) {
    detail::conv_fewc(p, x, w.fewc.data(), bias, y, act, accumulate, true);
    return;
  }
  if (!w.direct.empty()) {  // packed while AVX-512 was active: its kernels, whatever the level now
    direct_between_transposes(p, x, x_nchw, w, bias, y, act, accumulate);
    return;
  }
  detail::Scratch xt(x_nchw ? g.N * g.H * g.W * g.C : 1);
  if (x_nchw) {
    const std::array<std::int64_t, 3> shape{static_cast<std::int64_t>(g.N), static_cast<std::int64_t>(g.C),
                                            static_cast<std::int64_t>(g.H * g.W)};
    const std::array<std::int64_t, 3> perm{0, 2, 1};
    transpose(sizeof(float), shape, x, perm, xt.data());
    x = xt.data();
  }
  if (!w.few.empty()) {
    few_outputs(g, w, x, bias, y, act, accumulate);
    return;
  }
  if (pointwise && !w.b.empty()) {
    const Epilogue ep{bias != nullptr ? Bias::PerCol : Bias::None, bias, act};
    gemm_packed(false, g.P, 1.f, x, g.C, w.b, accumulate ? 1.f : 0.f, y, g.M, ep);
    return;
  }
  igemm(p, g, w, x, bias, y, act, accumulate);
}

}  // namespace onnxforge::simd

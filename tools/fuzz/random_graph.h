#pragma once
// Random small valid ONNX graphs for differential fuzzing of the passes: elementwise ops,
// MatMul(+bias), Conv(+BatchNormalization, +Relu), pools, Reshape/Transpose chains (incl. the 0-in-
// target case), Shape→Gather→Unsqueeze→Concat→Reshape chains, constant subgraphs, Constant
// nodes, identities, duplicates (CSE) and fan-out. Every value has a static shape so each
// generated model is valid by construction. Same seed, same graph.
#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "tests/common/graph_builder.h"

namespace onnxforge::fuzz {

class RandomGraph {
 public:
  explicit RandomGraph(uint64_t seed) : rng_(seed) {}

  std::unique_ptr<Model> build() {
    test::GraphBuilder b(13);
    b_ = &b;
    pool_.clear();
    bool image = pick(3) == 0;
    if (image) {  // batch 1 or 2, maps of 5 to 8 rows and columns
      const std::vector<int64_t> shape = {1 + pick(2), 4, 5 + pick(4), 5 + pick(4)};
      add(b.input("x", shape), shape);
    } else
      add(b.input("x", {4, 6}), {4, 6});
    int steps = 3 + pick(10);
    for (int i = 0; i < steps; ++i) step();
    // Outputs: the last value, and sometimes an intermediate one (graph output in the middle).
    b.output(pool_.back().v);
    if (pool_.size() > 2 && pick(3) == 0) {
      const Val& mid = pool_[pick(static_cast<int>(pool_.size()) - 1)];
      if (!(mid.v == pool_.back().v) && !b.g().is_graph_input(mid.v)) b.output(mid.v);
    }
    b_ = nullptr;
    return std::move(b.m);
  }

 private:
  struct Val {
    ValueId v;
    std::vector<int64_t> shape;
  };

  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(std::max(n, 1))); }
  float uni(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng_); }
  std::vector<float> data(int64_t n, float lo = -1, float hi = 1) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = uni(lo, hi);
    return v;
  }
  static int64_t numel(const std::vector<int64_t>& s) {
    return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>());
  }
  std::string name(const char* p) { return std::string(p) + std::to_string(counter_++); }
  void add(ValueId v, std::vector<int64_t> s) { pool_.push_back({v, std::move(s)}); }
  const Val& any() { return pool_[pick(static_cast<int>(pool_.size()))]; }
  const Val& last() { return pool_.back(); }
  ValueId constant(const std::vector<int64_t>& shape) { return b_->f32(name("c"), shape, data(numel(shape))); }

  void step() {
    test::GraphBuilder& b = *b_;
    Val x = pick(3) ? last() : any();
    const int64_t r = static_cast<int64_t>(x.shape.size());
    switch (pick(15)) {
      case 0: {  // unary
        static const char* ops[] = {"Relu", "Sigmoid", "Tanh", "Neg", "Abs", "Identity"};
        add(b.node(ops[pick(6)], {x.v}), x.shape);
        break;
      }
      case 1: {  // binary with a constant, sometimes a neutral one, sometimes broadcast
        static const char* ops[] = {"Add", "Sub", "Mul"};
        int k = pick(3);
        ValueId c;
        if (pick(3) == 0)
          c = b.f32(name("n"), {}, {k == 2 ? 1.0f : 0.0f});
        else if (pick(2))
          c = constant({x.shape.back()});
        else
          c = constant(x.shape);
        add(pick(2) || k == 1 ? b.node(ops[k], {x.v, c}) : b.node(ops[k], {c, x.v}), x.shape);
        break;
      }
      case 2: {  // binary of two pool values of the same shape (fan-out)
        for (const Val& y : pool_)
          if (y.shape == x.shape && !(y.v == x.v)) {
            add(b.node(pick(2) ? "Add" : "Mul", {x.v, y.v}), x.shape);
            return;
          }
        add(b.node("Mul", {x.v, x.v}), x.shape);
        break;
      }
      case 3: {  // transpose, often followed by its inverse (possibly through a unary op)
        std::vector<int64_t> p(r);
        std::iota(p.begin(), p.end(), 0);
        std::shuffle(p.begin(), p.end(), rng_);
        std::vector<int64_t> s(r), inv(r);
        for (int64_t i = 0; i < r; ++i) s[i] = x.shape[p[i]], inv[p[i]] = i;
        ValueId t = b.node("Transpose", {x.v}, {NewAttr::Ints("perm", p)});
        if (pick(2)) {
          if (pick(2)) t = b.node("Relu", {t});
          add(b.node("Transpose", {t}, {NewAttr::Ints("perm", inv)}), x.shape);
        } else
          add(t, s);
        break;
      }
      case 4: {  // reshape chain, sometimes with 0 in the second target
        int64_t n = numel(x.shape);
        std::vector<int64_t> s1{n / x.shape.back(), x.shape.back()};
        ValueId r1 = b.node("Reshape", {x.v, b.i64(name("s"), s1)});
        if (pick(2)) {
          add(r1, s1);
          break;
        }
        std::vector<int64_t> s2 = pick(2) ? std::vector<int64_t>{0, -1} : std::vector<int64_t>{n};
        std::vector<int64_t> out = s2.size() == 2 ? s1 : std::vector<int64_t>{n};
        if (s2.size() == 2 && s1[1] % 2 == 0) {
          s2 = {0, 2, -1};
          out = {s1[0], 2, s1[1] / 2};
        }
        ValueId r2 = b.node("Reshape", {r1, b.i64(name("s"), s2)});
        ValueId back = b.node("Reshape", {r2, b.i64(name("s"), x.shape)});
        add(back, x.shape);
        break;
      }
      case 5: {  // shape chain to a Reshape of the same value
        ValueId sh = b.node("Shape", {x.v});
        std::vector<ValueId> parts;
        for (int64_t i = 0; i < r; ++i)
          parts.push_back(
              b.node("Unsqueeze", {b.node("Gather", {sh, b.i64(name("i"), {i}, true)}), b.i64(name("a"), {0})}));
        ValueId target = b.node("Concat", parts, {NewAttr::Int("axis", 0)});
        add(b.node("Reshape", {x.v, target}), x.shape);
        break;
      }
      case 6: {  // rank-2 MatMul (+bias)
        if (r != 2) return step_unary(x);
        int64_t n = 2 + pick(5);
        ValueId y = b.node("MatMul", {x.v, constant({x.shape[1], n})});
        if (pick(3)) y = b.node("Add", {y, constant(pick(2) ? std::vector<int64_t>{n} : std::vector<int64_t>{1, n})});
        add(y, {x.shape[0], n});
        break;
      }
      case 7: {  // Conv (+BN) (+Relu)
        if (r != 4) return step_unary(x);
        int64_t c = x.shape[1], o = 2 + pick(4);
        std::vector<NewAttr> at;
        at.push_back(NewAttr::Ints("pads", {1, 1, 1, 1}));
        ValueId y = b.node("Conv", {x.v, constant({o, c, 3, 3}), constant({o})}, at);
        if (pick(3))
          y = b.node("BatchNormalization",
                     {y, constant({o}), constant({o}), constant({o}), b.f32(name("var"), {o}, data(o, 0.5f, 2.0f))});
        if (pick(2)) y = b.node("Relu", {y});
        add(y, {x.shape[0], o, x.shape[2], x.shape[3]});
        break;
      }
      case 8: {  // BN before an unpadded 1x1 conv
        if (r != 4) return step_unary(x);
        int64_t c = x.shape[1];
        ValueId y = b.node("BatchNormalization", {x.v, constant({c}), constant({c}), constant({c}),
                                                  b.f32(name("var"), {c}, data(c, 0.5f, 2.0f))});
        add(b.node("Conv", {y, constant({c, c, 1, 1})}), x.shape);
        break;
      }
      case 9: {  // constant subgraph feeding the graph
        ValueId k = b.node("Add", {constant({x.shape.back()}), constant({x.shape.back()})});
        k = b.node("Mul", {k, b.f32(name("h"), {}, {0.5f})});
        add(b.node("Add", {x.v, k}), x.shape);
        break;
      }
      case 10: {  // Constant node
        int64_t n = x.shape.back();
        std::vector<float> d = data(n);
        TensorId t = b.m->tensors.add_owned(
            Sym{}, DType::Float, std::span<const int64_t>(&n, 1),
            std::span<const std::byte>(reinterpret_cast<const std::byte*>(d.data()), d.size() * 4));
        ValueId c = b.node("Constant", {}, {NewAttr::Tensor("value", t)});
        add(b.node("Sub", {x.v, c}), x.shape);
        break;
      }
      case 11: {  // duplicates (CSE) joined again
        ValueId a = b.node("Sigmoid", {x.v}), c = b.node("Sigmoid", {x.v});
        add(b.node("Add", {a, c}), x.shape);
        break;
      }
      case 12: {  // identities: Dropout, Cast to the same type
        ValueId y = pick(2) ? b.node("Dropout", {x.v}) : b.node("Cast", {x.v}, {NewAttr::Int("to", 1)});
        add(y, x.shape);
        break;
      }
      case 13: {  // pooling: same-size MaxPool/AveragePool, or squeeze-excitation x * sigmoid(GAP(x))
        if (r != 4) return step_unary(x);
        std::vector<NewAttr> at = {NewAttr::Ints("kernel_shape", {3, 3}), NewAttr::Ints("pads", {1, 1, 1, 1})};
        switch (pick(3)) {
          case 0: add(b.node("MaxPool", {x.v}, at), x.shape); break;
          case 1:
            at.push_back(NewAttr::Int("count_include_pad", pick(2)));
            add(b.node("AveragePool", {x.v}, at), x.shape);
            break;
          default: add(b.node("Mul", {x.v, b.node("Sigmoid", {b.node("GlobalAveragePool", {x.v})})}), x.shape);
        }
        break;
      }
      default: {  // dead branch
        b.node("Tanh", {x.v});
        step_unary(x);
        break;
      }
    }
  }
  void step_unary(const Val& x) { add(b_->node("Relu", {x.v}), x.shape); }

  std::mt19937_64 rng_;
  test::GraphBuilder* b_ = nullptr;
  std::vector<Val> pool_;
  int counter_ = 0;
};

}  // namespace onnxforge::fuzz

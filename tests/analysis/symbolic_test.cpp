// Canonical symbolic dims: equal expressions are equal handles, text round-trips.
#include <gtest/gtest.h>

#include "analysis/symbolic.h"

using namespace onnxforge;

namespace {
SymDim S(const char* name) { return SymDim::symbol(name); }
SymDim C(int64_t v) { return SymDim::constant(v); }
}  // namespace

TEST(SymDim, CanonicalFormsCompareEqual) {
  SymDim seq = S("seq"), batch = S("batch");
  EXPECT_EQ(seq * C(12), C(12) * seq);
  EXPECT_EQ((seq * C(12)).str(), "seq*12");
  EXPECT_EQ(batch * seq, seq * batch);
  EXPECT_EQ((batch * seq).str(), "batch*seq");
  EXPECT_EQ((seq + C(1)).str(), "seq+1");
  EXPECT_EQ(seq + C(1) - C(1), seq);
  EXPECT_EQ(seq - seq, C(0));
  EXPECT_EQ((seq + seq).str(), "seq*2");
  EXPECT_EQ(((seq + C(1)) * C(2) - C(1)).str(), "seq*2+1");
  EXPECT_EQ((C(5) - seq).str(), "-seq+5");
  EXPECT_TRUE(seq.is_symbol());
  EXPECT_FALSE((seq * C(2)).is_symbol());
}

TEST(SymDim, FloorDivision) {
  SymDim seq = S("seq");
  EXPECT_EQ(floor_div(C(7), 2), C(3));
  EXPECT_EQ(floor_div(C(-7), 2), C(-4));
  EXPECT_EQ(floor_div(seq * C(4), 2), seq * C(2));
  EXPECT_EQ(floor_div(seq + C(1), 2).str(), "(seq+1)/2");
  // conv: (seq + 2*1 - 3)/2 + 1 = (seq+1)/2 after pulling multiples of 2 out.
  EXPECT_EQ(floor_div(seq - C(1), 2) + C(1), floor_div(seq + C(1), 2));
  EXPECT_EQ(floor_div(seq, 2).str(), "seq/2");
  EXPECT_EQ((S("batch") * floor_div(seq, 2)).str(), "batch*(seq/2)");
  EXPECT_EQ(ceil_div(seq, 1), seq);
}

TEST(SymDim, ExactDivisionAndQuotient) {
  SymDim seq = S("seq"), batch = S("batch");
  EXPECT_EQ(exact_div(seq * C(12), C(12)), seq);
  EXPECT_EQ(exact_div(batch * seq * C(768), batch * seq), C(768));
  EXPECT_EQ(exact_div(batch * seq * C(768), seq * C(12)), batch * C(64));
  EXPECT_FALSE(exact_div(seq, C(2)).has_value());
  EXPECT_FALSE(exact_div(seq + C(1), seq).has_value());
  auto q = SymDim::quotient({batch, seq + C(1), C(768)}, {seq + C(1), C(12)});
  ASSERT_TRUE(q);
  EXPECT_EQ(*q, batch * C(64));
}

TEST(SymDim, ParseRoundTrip) {
  SymDim seq = S("seq"), batch = S("batch");
  for (SymDim d : {seq * C(12), batch * seq, seq + C(1), floor_div(seq + C(1), 2), batch * floor_div(seq, 2),
                   C(3) - seq * C(2), floor_div(batch * seq - C(1), 3) * C(5)}) {
    EXPECT_EQ(SymDim::parse(d.str()), d) << d.str();
  }
  EXPECT_EQ(SymDim::parse("12*seq"), seq * C(12));
  EXPECT_TRUE(SymDim::parse("sequence length").is_symbol());
  EXPECT_TRUE(SymDim::parse("batch_size").is_symbol());
  EXPECT_TRUE(SymDim::parse("a(b").is_symbol());  // not an expression: one name
}

TEST(SymDim, Substitute) {
  SymDim seq = S("seq"), batch = S("batch");
  std::unordered_map<Sym, int64_t> fix{{intern("batch"), 2}};
  EXPECT_EQ((batch * seq).substitute(fix), seq * C(2));
  EXPECT_EQ(floor_div(batch * seq + C(1), 2).substitute({{intern("batch"), 2}, {intern("seq"), 5}}), C(5));
  EXPECT_EQ(floor_div(batch + seq, 2).symbols().size(), 2u);
}

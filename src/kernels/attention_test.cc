// Paged causal attention and write_kv. Contract (attention.h): a query at position p visits keys
// 0..p in tiles of kAttentionTile absolute positions, ascending, one online-softmax update per tile
// (scores by the canonical 16-lane dot, tile sum and acc += p·v ascending), and a (token, head) pair
// is never split. Checked as bits against that sentence written out here; query alone vs inside
// random batches of other sequences' tokens; one-shot prefill vs chunked prefill + decode; prompts
// and chunks in position order (the query blocks of the prefill path) for GQA groups 1–32, chunks
// starting mid-tile, vs the contract and vs each token alone; block sizes and physical block ids;
// threads. Correctness against naive double softmax attention over the bf16-rounded K/V. With a
// sliding window (keys f..p, f = max(0, p − W + 1), tiles still at multiples of kAttentionTile): the
// contract, prefill blocks and chunks vs each token alone, windows inside, across and beyond tiles.
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/kernel_test_util.h"
#include "kernels/math.h"

namespace ditto {
namespace {

using test::BitsEqual;
using test::Rng;

constexpr uint16_t kBf16NaN = 0x7fc0;  // fills every slot not written yet: reading one poisons the row

struct Heads {
  int64_t num_heads;
  int64_t num_kv_heads;
  int64_t head_dim;
  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
};

std::string label(const Heads& h) {
  return "heads " + std::to_string(h.num_heads) + "/" + std::to_string(h.num_kv_heads) + " d " +
         std::to_string(h.head_dim);
}

// The q, k, v rows of a few sequences, as the model would produce them (f32, before rounding).
struct Workload {
  Heads heads;
  float scale;
  std::vector<int64_t> seq_lens;
  std::vector<std::vector<float>> q;  // per sequence: [len, q_dim] f32
  std::vector<std::vector<float>> k;  // per sequence: [len, kv_dim] f32
  std::vector<std::vector<float>> v;  // per sequence: [len, kv_dim] f32
  int64_t window = 0;                 // AttentionShape::sliding_window

  // K/V as the cache holds them (bf16, decoded exactly).
  float k_rounded(int64_t seq, int64_t pos, int64_t i) const {
    return bf16_to_f32(f32_to_bf16(k[seq][pos * heads.kv_dim() + i]));
  }
  float v_rounded(int64_t seq, int64_t pos, int64_t i) const {
    return bf16_to_f32(f32_to_bf16(v[seq][pos * heads.kv_dim() + i]));
  }
};

Workload make_workload(Rng& rng, Heads heads, std::vector<int64_t> seq_lens) {
  Workload w{heads, 1.0f / std::sqrt(static_cast<float>(heads.head_dim)), std::move(seq_lens), {}, {}, {}};
  for (int64_t len : w.seq_lens) {
    // Query scales vary per sequence so that some softmaxes are flat and some sharply peaked.
    w.q.push_back(rng.normal_vector(static_cast<size_t>(len * heads.q_dim()), rng.uniform(0.3f, 4.0f)));
    w.k.push_back(rng.normal_vector(static_cast<size_t>(len * heads.kv_dim())));
    w.v.push_back(rng.normal_vector(static_cast<size_t>(len * heads.kv_dim())));
  }
  return w;
}

struct Token {
  int32_t seq;
  int32_t pos;
};

std::vector<Token> all_tokens(const Workload& w) {
  std::vector<Token> tokens;
  for (size_t s = 0; s < w.seq_lens.size(); ++s)
    for (int64_t p = 0; p < w.seq_lens[s]; ++p) tokens.push_back({static_cast<int32_t>(s), static_cast<int32_t>(p)});
  return tokens;
}

void shuffle(Rng& rng, std::vector<Token>& tokens) {
  for (size_t i = tokens.size(); i > 1; --i) std::swap(tokens[i - 1], tokens[rng.next() % i]);
}

// A paged KV cache with a random physical block assignment; spare blocks (NaN) sit between the
// sequences' blocks and fill the unused block-table entries.
struct PagedCache {
  int64_t block_size = 0;
  int64_t kv_dim = 0;
  int64_t max_blocks = 0;             // per sequence
  std::vector<uint16_t> k, v;         // [num_blocks·block_size, kv_dim] bf16
  std::vector<int32_t> block_tables;  // [num_seqs, max_blocks]

  int64_t num_slots() const { return static_cast<int64_t>(k.size()) / kv_dim; }
  KvCacheLayer layer() { return {k.data(), v.data(), num_slots()}; }
  int64_t slot(Token t) const {
    return int64_t{block_tables[t.seq * max_blocks + t.pos / block_size]} * block_size + t.pos % block_size;
  }
};

PagedCache make_cache(Rng& rng, const Workload& w, int64_t block_size) {
  PagedCache c;
  c.block_size = block_size;
  c.kv_dim = w.heads.kv_dim();
  int64_t needed = 0;
  for (int64_t len : w.seq_lens) {
    needed += (len + block_size - 1) / block_size;
    c.max_blocks = std::max(c.max_blocks, (len + block_size - 1) / block_size);
  }
  c.max_blocks += 2;
  const int64_t num_blocks = needed + 7;
  std::vector<int32_t> ids(static_cast<size_t>(num_blocks));
  for (int64_t i = 0; i < num_blocks; ++i) ids[i] = static_cast<int32_t>(i);
  for (size_t i = ids.size(); i > 1; --i) std::swap(ids[i - 1], ids[rng.next() % i]);
  size_t next = 0;
  c.block_tables.assign(w.seq_lens.size() * c.max_blocks, 0);
  for (size_t s = 0; s < w.seq_lens.size(); ++s) {
    const int64_t used = (w.seq_lens[s] + block_size - 1) / block_size;
    for (int64_t b = 0; b < used; ++b) c.block_tables[s * c.max_blocks + b] = ids[next++];
  }
  for (size_t s = 0; s < w.seq_lens.size(); ++s) {
    const int64_t used = (w.seq_lens[s] + block_size - 1) / block_size;
    for (int64_t b = used; b < c.max_blocks; ++b)
      c.block_tables[s * c.max_blocks + b] = ids[needed + rng.next() % (num_blocks - needed)];
  }
  c.k.assign(static_cast<size_t>(num_blocks * block_size * c.kv_dim), kBf16NaN);
  c.v = c.k;
  return c;
}

// write_kv for `tokens` in one call, from rows with a padded stride.
void write_tokens(PagedCache& c, const Workload& w, const std::vector<Token>& tokens) {
  const int64_t kv_dim = w.heads.kv_dim();
  const int64_t ldk = kv_dim + 3, ldv = kv_dim + 5;
  std::vector<float> k(tokens.size() * ldk), v(tokens.size() * ldv);
  std::vector<int64_t> slots;
  for (size_t t = 0; t < tokens.size(); ++t) {
    std::memcpy(&k[t * ldk], &w.k[tokens[t].seq][tokens[t].pos * kv_dim], sizeof(float) * kv_dim);
    std::memcpy(&v[t * ldv], &w.v[tokens[t].seq][tokens[t].pos * kv_dim], sizeof(float) * kv_dim);
    slots.push_back(c.slot(tokens[t]));
  }
  write_kv(k.data(), ldk, v.data(), ldv, slots.data(), static_cast<int64_t>(tokens.size()), kv_dim, c.layer());
}

PagedCache filled_cache(Rng& rng, const Workload& w, int64_t block_size) {
  PagedCache c = make_cache(rng, w, block_size);
  std::vector<Token> tokens = all_tokens(w);
  shuffle(rng, tokens);
  write_tokens(c, w, tokens);
  return c;
}

// paged_attention over `tokens` in one call (padded q/out strides); returns [num_tokens, q_dim].
std::vector<float> attend(PagedCache& c, const Workload& w, const std::vector<Token>& tokens, ThreadPool* pool) {
  const int64_t q_dim = w.heads.q_dim();
  const int64_t ldq = q_dim + 1, ldo = q_dim + 2;
  const int64_t n = static_cast<int64_t>(tokens.size());
  std::vector<float> q(static_cast<size_t>(n * ldq));
  std::vector<int32_t> positions, token_seq;
  for (int64_t t = 0; t < n; ++t) {
    std::memcpy(&q[t * ldq], &w.q[tokens[t].seq][tokens[t].pos * q_dim], sizeof(float) * q_dim);
    positions.push_back(tokens[t].pos);
    token_seq.push_back(tokens[t].seq);
  }
  std::vector<float> out(static_cast<size_t>(n * ldo), std::numeric_limits<float>::quiet_NaN());
  const AttentionShape shape{w.heads.num_heads, w.heads.num_kv_heads, w.heads.head_dim, c.block_size, w.scale,
                             w.window};
  paged_attention(q.data(), ldq, positions.data(), token_seq.data(), n, c.block_tables.data(), c.max_blocks, c.layer(),
                  shape, out.data(), ldo, pool);
  std::vector<float> compact(static_cast<size_t>(n * q_dim));
  for (int64_t t = 0; t < n; ++t) {
    std::memcpy(&compact[t * q_dim], &out[t * ldo], sizeof(float) * q_dim);
    for (int64_t i = q_dim; i < ldo; ++i) EXPECT_TRUE(std::isnan(out[t * ldo + i])) << "wrote past q_dim";
  }
  return compact;
}

// Every token of w in a call of its own (a batch of one, as in a decode step): per sequence
// [len, q_dim].
std::vector<std::vector<float>> attend_each_alone(PagedCache& c, const Workload& w) {
  const int64_t q_dim = w.heads.q_dim();
  std::vector<std::vector<float>> alone(w.seq_lens.size());
  for (size_t s = 0; s < w.seq_lens.size(); ++s) alone[s].resize(static_cast<size_t>(w.seq_lens[s] * q_dim));
  for (const Token& t : all_tokens(w)) {
    const std::vector<float> o = attend(c, w, {t}, nullptr);
    std::memcpy(&alone[t.seq][t.pos * q_dim], o.data(), sizeof(float) * q_dim);
  }
  return alone;
}

// The contract sentence of attention.h, literally, over the rounded K/V of one sequence.
std::vector<float> contract_attention(const Workload& w, Token tok) {
  const Heads& hs = w.heads;
  const int64_t d = hs.head_dim;
  std::vector<float> out(static_cast<size_t>(hs.q_dim()));
  std::vector<float> kf(static_cast<size_t>(d));
  for (int64_t h = 0; h < hs.num_heads; ++h) {
    const int64_t kvh = h / (hs.num_heads / hs.num_kv_heads);
    const float* q = &w.q[tok.seq][tok.pos * hs.q_dim() + h * d];
    std::vector<float> acc(static_cast<size_t>(d), 0.0f);
    float m = -std::numeric_limits<float>::infinity();
    float l = 0.0f;
    const int64_t first = w.window > 0 ? std::max<int64_t>(0, tok.pos - w.window + 1) : 0;
    for (int64_t t0 = first / kAttentionTile * kAttentionTile; t0 <= tok.pos; t0 += kAttentionTile) {
      const int64_t k0 = std::max(t0, first);
      const int64_t n = std::min<int64_t>(t0 + kAttentionTile, tok.pos + 1) - k0;
      std::vector<float> p(static_cast<size_t>(n));
      float tile_max = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t i = 0; i < d; ++i) kf[i] = w.k_rounded(tok.seq, k0 + j, kvh * d + i);
        p[j] = test::contract_dot(q, kf.data(), d) * w.scale;
        tile_max = p[j] > tile_max ? p[j] : tile_max;
      }
      const float m_new = tile_max > m ? tile_max : m;
      const float alpha = exp_f32(m - m_new);
      float tile_sum = 0.0f;
      for (int64_t j = 0; j < n; ++j) {
        p[j] = exp_f32(p[j] - m_new);
        tile_sum = tile_sum + p[j];
      }
      l = l * alpha + tile_sum;
      for (int64_t i = 0; i < d; ++i) acc[i] = acc[i] * alpha;
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < d; ++i) acc[i] = std::fma(p[j], w.v_rounded(tok.seq, k0 + j, kvh * d + i), acc[i]);
      m = m_new;
    }
    for (int64_t i = 0; i < d; ++i) out[h * d + i] = acc[i] / l;
  }
  return out;
}

// The configurations every test runs: GQA groups 1, 2 and 4, head_dim 64 and 128, contexts from 1
// to 300 positions (up to 10 tiles), tile-boundary lengths included.
struct Config {
  Heads heads;
  std::vector<int64_t> seq_lens;
};

std::vector<Config> configs() {
  return {
      {{4, 2, 128}, {1, 2, 31, 32, 33, 64, 65, 300}},
      {{4, 1, 64}, {300, 17, 1, 96, 97}},
      {{4, 4, 64}, {5, 40, 129}},
      {{4, 2, 64}, {33, 150}},
  };
}

TEST(AttentionTest, MatchesContractBitwise) {
  Rng rng(70);
  for (const Config& cfg : configs()) {
    const Workload w = make_workload(rng, cfg.heads, cfg.seq_lens);
    PagedCache c = filled_cache(rng, w, 16);
    std::vector<Token> tokens = all_tokens(w);
    shuffle(rng, tokens);
    const std::vector<float> out = attend(c, w, tokens, nullptr);
    const int64_t q_dim = w.heads.q_dim();
    for (size_t t = 0; t < tokens.size(); ++t) {
      const std::vector<float> want = contract_attention(w, tokens[t]);
      ASSERT_TRUE(BitsEqual(want.data(), out.data() + t * q_dim, q_dim))
          << label(w.heads) << " seq " << tokens[t].seq << " pos " << tokens[t].pos;
    }
  }
}

// GQA groups 1 to 32 (query heads per KV head), head_dim 64 and 128, with contexts that end inside
// tiles, for the query-blocked prefill path: a block holds block_positions(group) positions × group
// heads, so these cover blocks of 1 to 256 positions, padded rows (group 3) and single-position blocks
// (group 32: even one decode token fills a vector of rows).
std::vector<Config> prefill_configs() {
  return {
      {{8, 8, 64}, {300, 70}},   {{6, 2, 128}, {200, 1, 33}}, {{8, 2, 64}, {129, 64}},
      {{16, 2, 128}, {100, 31}}, {{32, 1, 64}, {40, 3}},      {{4, 2, 128}, {290, 32}},
  };
}

// Whole prompts in one call with positions in order (runs of consecutive positions form query blocks
// on the paths that have the blocked kernel), against the contract sentence.
TEST(AttentionTest, PrefillInOrderMatchesContractBitwise) {
  Rng rng(77);
  ThreadPool pool2(2);
  std::vector<Config> all = configs();
  for (const Config& cfg : prefill_configs()) all.push_back(cfg);
  for (const Config& cfg : all) {
    const Workload w = make_workload(rng, cfg.heads, cfg.seq_lens);
    PagedCache c = filled_cache(rng, w, cfg.heads.head_dim == 64 ? 16 : 5);
    const std::vector<Token> tokens = all_tokens(w);
    const std::vector<float> out = attend(c, w, tokens, &pool2);
    const int64_t q_dim = w.heads.q_dim();
    for (size_t t = 0; t < tokens.size(); ++t) {
      const std::vector<float> want = contract_attention(w, tokens[t]);
      ASSERT_TRUE(BitsEqual(want.data(), out.data() + t * q_dim, q_dim))
          << label(w.heads) << " seq " << tokens[t].seq << " pos " << tokens[t].pos;
    }
  }
}

// Prefill chunks that start anywhere (not at tile boundaries), in order and of any length, several
// sequences' chunks in one call, interleaved with decode steps of one token: every token's bits are
// those it gets alone (one decode-style call per token) and those of the contract.
TEST(AttentionTest, PrefillChunksEqualTheTokenAloneForEveryGroupSize) {
  Rng rng(78);
  ThreadPool pool2(2);
  for (const Config& cfg : prefill_configs()) {
    const Workload w = make_workload(rng, cfg.heads, cfg.seq_lens);
    const int64_t q_dim = w.heads.q_dim();
    PagedCache alone_cache = filled_cache(rng, w, 16);
    const std::vector<std::vector<float>> alone = attend_each_alone(alone_cache, w);
    for (const Token& t : all_tokens(w))
      ASSERT_TRUE(BitsEqual(contract_attention(w, t).data(), &alone[t.seq][t.pos * q_dim], q_dim))
          << label(w.heads) << " seq " << t.seq << " pos " << t.pos;
    PagedCache chunked = make_cache(rng, w, 48);  // another block size and physical layout, NaN-filled
    std::vector<int64_t> done(w.seq_lens.size(), 0);
    for (bool any = true; any;) {
      std::vector<Token> step;
      for (size_t s = 0; s < w.seq_lens.size(); ++s) {
        const int64_t left = w.seq_lens[s] - done[s];
        if (left == 0) continue;
        const int64_t chunk = rng.next() % 3 == 0 ? 1 : rng.uniform_int(1, std::min<int64_t>(left, 150));
        for (int64_t p = done[s]; p < done[s] + std::min(chunk, left); ++p)
          step.push_back({static_cast<int32_t>(s), static_cast<int32_t>(p)});
        done[s] += std::min(chunk, left);
      }
      any = !step.empty();
      if (!any) break;
      write_tokens(chunked, w, step);
      const std::vector<float> out = attend(chunked, w, step, rng.next() % 2 ? &pool2 : nullptr);
      for (size_t i = 0; i < step.size(); ++i)
        ASSERT_TRUE(BitsEqual(&alone[step[i].seq][step[i].pos * q_dim], &out[i * q_dim], q_dim))
            << label(w.heads) << " seq " << step[i].seq << " pos " << step[i].pos << " in a step of " << step.size();
    }
  }
}

// Sliding windows of 1 key, inside a tile, a tile's width and across tile boundaries, over every
// configuration: all tokens in order (query blocks whose rows start their windows in different
// tiles) and shuffled, against the contract; then chunks vs each token alone; and the window's
// keys against naive double attention over exactly positions p − W + 1 .. p.
TEST(AttentionTest, SlidingWindowMatchesContractChunksAndDouble) {
  Rng rng(79);
  ThreadPool pool2(2);
  std::vector<Config> all = configs();
  for (const Config& cfg : prefill_configs()) all.push_back(cfg);
  for (const int64_t window : {1, 8, 32, 45, 100}) {
    for (const Config& cfg : all) {
      Workload w = make_workload(rng, cfg.heads, cfg.seq_lens);
      w.window = window;
      const int64_t q_dim = w.heads.q_dim();
      PagedCache c = filled_cache(rng, w, 16);
      std::vector<Token> tokens = all_tokens(w);
      for (int order = 0; order < 2; ++order) {
        if (order == 1) shuffle(rng, tokens);
        const std::vector<float> out = attend(c, w, tokens, order == 0 ? &pool2 : nullptr);
        for (size_t t = 0; t < tokens.size(); ++t) {
          const std::vector<float> want = contract_attention(w, tokens[t]);
          ASSERT_TRUE(BitsEqual(want.data(), out.data() + t * q_dim, q_dim))
              << label(w.heads) << " window " << window << " seq " << tokens[t].seq << " pos " << tokens[t].pos;
        }
      }
      // Chunks of random lengths (crossing the window's edge and tiles) in one cache written as
      // they go: each token's bits are the contract's.
      PagedCache chunked = make_cache(rng, w, 48);
      std::vector<int64_t> done(w.seq_lens.size(), 0);
      for (bool any = true; any;) {
        std::vector<Token> step;
        for (size_t s = 0; s < w.seq_lens.size(); ++s) {
          const int64_t left = w.seq_lens[s] - done[s];
          if (left == 0) continue;
          const int64_t chunk = std::min(left, rng.uniform_int(1, 70));
          for (int64_t p = done[s]; p < done[s] + chunk; ++p)
            step.push_back({static_cast<int32_t>(s), static_cast<int32_t>(p)});
          done[s] += chunk;
        }
        any = !step.empty();
        if (!any) break;
        write_tokens(chunked, w, step);
        const std::vector<float> out = attend(chunked, w, step, &pool2);
        for (size_t i = 0; i < step.size(); ++i)
          ASSERT_TRUE(BitsEqual(contract_attention(w, step[i]).data(), &out[i * q_dim], q_dim))
              << label(w.heads) << " window " << window << " chunked seq " << step[i].seq << " pos " << step[i].pos;
      }
      // The semantics: naive double softmax over keys max(0, p − W + 1)..p (a loose tolerance; the
      // full-attention test derives the bound).
      for (const Token& tok : all_tokens(w)) {
        const std::vector<float> got = contract_attention(w, tok);
        const Heads& hs = w.heads;
        const int64_t d = hs.head_dim;
        const int64_t first = std::max<int64_t>(0, tok.pos - window + 1);
        for (int64_t h = 0; h < hs.num_heads; ++h) {
          const int64_t kvh = h / (hs.num_heads / hs.num_kv_heads);
          const float* q = &w.q[tok.seq][tok.pos * q_dim + h * d];
          std::vector<double> e;
          double max = -INFINITY;
          for (int64_t t = first; t <= tok.pos; ++t) {
            double dot = 0.0;
            for (int64_t i = 0; i < d; ++i) dot += static_cast<double>(q[i]) * w.k_rounded(tok.seq, t, kvh * d + i);
            e.push_back(w.scale * dot);
            max = std::max(max, e.back());
          }
          double sum = 0.0;
          for (double& x : e) sum += (x = std::exp(x - max));
          for (int64_t i = 0; i < d; ++i) {
            double num = 0.0;
            for (int64_t t = first; t <= tok.pos; ++t) num += e[t - first] * w.v_rounded(tok.seq, t, kvh * d + i);
            ASSERT_NEAR(got[h * d + i], num / sum, 1e-4 * (1.0 + std::fabs(num / sum)))
                << label(hs) << " window " << window << " pos " << tok.pos << " head " << h << " i " << i;
          }
        }
      }
    }
  }
}

TEST(AttentionTest, MatchesDoubleSoftmaxAttention) {
  // Naive attention in double over the bf16-rounded K/V: s_t = scale·q·k_t, w_t = e^(s_t − max),
  // out = Σ w_t·v_t / Σ w_t. First-order error bound of the kernel, per output (T = p + 1 keys,
  // nt = ceil(T/32) tiles, c = ceil(d/16)):
  //  - score: e_t = scale·γ_{c+4}·Σ_i|q_i·k_ti| (lane dot) + u·|s_t| (×scale);
  //  - weight p_t relative: ε_t = e_t + u·(max − s_t) (subtraction) + 4u (exp_f32 ≤ 2 ulp), plus the
  //    chain of α = exp(m_old − m_new) rescalings after its tile: ≤ u·(max − s_t) + 4u·(nt − 1);
  //    a shared factor would cancel in acc/l, a per-term one moves out by ≤ ε_t·|v_t − out|;
  //  - acc: each p_t·v_t passes ≤ T + nt roundings (fmas and α products): γ_{T+nt}·Σ w_t|v_t|/W;
  //  - l: ≤ 32 + 2·nt roundings: γ_{32+2nt}·|out|; the division: u·|out|.
  // |out − ref| ≤ Σ_t w_t·ε_t·(|v_t| + |out|)/W + γ_{T+nt}·Σ w_t|v_t|/W + (γ_{32+2nt} + u)·|out|,
  // times 1.01 for second-order terms, plus T·2^-140·max|v| for weights that underflow.
  Rng rng(71);
  const double u = test::kU;
  double worst = 0.0;  // observed / bound
  for (const Config& cfg : configs()) {
    const Workload w = make_workload(rng, cfg.heads, cfg.seq_lens);
    PagedCache c = filled_cache(rng, w, 16);
    const std::vector<Token> tokens = all_tokens(w);
    const std::vector<float> out = attend(c, w, tokens, nullptr);
    const Heads& hs = w.heads;
    const int64_t d = hs.head_dim;
    const int64_t cl = (d + 15) / 16;
    for (size_t ti = 0; ti < tokens.size(); ++ti) {
      const Token tok = tokens[ti];
      const int64_t T = tok.pos + 1;
      const int64_t nt = (T + kAttentionTile - 1) / kAttentionTile;
      for (int64_t h = 0; h < hs.num_heads; ++h) {
        const int64_t kvh = h / (hs.num_heads / hs.num_kv_heads);
        const float* q = &w.q[tok.seq][tok.pos * hs.q_dim() + h * d];
        std::vector<double> s(static_cast<size_t>(T)), e(static_cast<size_t>(T));
        double max = -INFINITY;
        for (int64_t t = 0; t < T; ++t) {
          double dot = 0.0, abs_dot = 0.0;
          for (int64_t i = 0; i < d; ++i) {
            const double prod = static_cast<double>(q[i]) * w.k_rounded(tok.seq, t, kvh * d + i);
            dot += prod;
            abs_dot += std::fabs(prod);
          }
          s[t] = w.scale * dot;
          e[t] = w.scale * test::gamma_n(cl + 4) * abs_dot + u * std::fabs(s[t]);
          max = std::max(max, s[t]);
        }
        double sum_w = 0.0;
        std::vector<double> wt(static_cast<size_t>(T)), eps(static_cast<size_t>(T));
        for (int64_t t = 0; t < T; ++t) {
          wt[t] = std::exp(s[t] - max);
          eps[t] = e[t] + 2 * u * (max - s[t]) + 4 * u * static_cast<double>(nt);
          sum_w += wt[t];
        }
        for (int64_t i = 0; i < d; ++i) {
          double num = 0.0, abs_num = 0.0, max_v = 0.0;
          for (int64_t t = 0; t < T; ++t) {
            const double vv = w.v_rounded(tok.seq, t, kvh * d + i);
            num += wt[t] * vv;
            abs_num += wt[t] * std::fabs(vv);
            max_v = std::max(max_v, std::fabs(vv));
          }
          const double want = num / sum_w;
          double spread = 0.0;
          for (int64_t t = 0; t < T; ++t)
            spread += wt[t] * eps[t] * (std::fabs(w.v_rounded(tok.seq, t, kvh * d + i)) + std::fabs(want));
          const double tol = 1.01 * (spread / sum_w + test::gamma_n(T + nt) * abs_num / sum_w +
                                     (test::gamma_n(32 + 2 * nt) + u) * std::fabs(want)) +
                             static_cast<double>(T) * 0x1p-140 * max_v;
          const double err = std::fabs(out[ti * hs.q_dim() + h * d + i] - want);
          ASSERT_LE(err, tol) << label(hs) << " seq " << tok.seq << " pos " << tok.pos << " head " << h << " i " << i;
          worst = std::max(worst, err / tol);
        }
      }
    }
  }
  std::printf("[ measured ] attention max error = %.3f of its first-order bound\n", worst);
}

TEST(AttentionTest, QueryAloneEqualsQueryInsideRandomBatches) {
  Rng rng(72);
  ThreadPool pool1(1), pool2(2), pool3(3);
  ThreadPool* pools[] = {nullptr, &pool1, &pool2, &pool3};
  for (const Config& cfg : configs()) {
    const Workload w = make_workload(rng, cfg.heads, cfg.seq_lens);
    PagedCache c = filled_cache(rng, w, 16);
    const std::vector<Token> tokens = all_tokens(w);
    const int64_t q_dim = w.heads.q_dim();
    const std::vector<std::vector<float>> alone = attend_each_alone(c, w);  // the reference
    for (int rep = 0; rep < 12; ++rep) {
      const int64_t n = rng.uniform_int(1, 70);
      std::vector<Token> batch;
      for (int64_t i = 0; i < n; ++i) batch.push_back(tokens[rng.next() % tokens.size()]);
      ThreadPool* pool = pools[rng.next() % 4];
      const std::vector<float> out = attend(c, w, batch, pool);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_TRUE(BitsEqual(&alone[batch[i].seq][batch[i].pos * q_dim], &out[i * q_dim], q_dim))
            << label(w.heads) << " seq " << batch[i].seq << " pos " << batch[i].pos << " at " << i << " of a batch of "
            << n;
    }
  }
}

TEST(AttentionTest, ChunkedPrefillAndDecodeEqualOneShotPrefill) {
  // One shot: every K/V written, then every query in one call. Chunked: a fresh NaN-filled cache
  // with another physical layout; each step writes the K/V of the step's tokens, then attends them,
  // a prefill chunk of random length first, then decode-style single tokens or more chunks, with
  // the sequences' steps interleaved in the same calls. Slots of later positions are still NaN when
  // a chunk runs, so a kernel that looks past p fails here.
  Rng rng(73);
  ThreadPool pool2(2);
  for (const Config& cfg : configs()) {
    const Workload w = make_workload(rng, cfg.heads, cfg.seq_lens);
    const int64_t q_dim = w.heads.q_dim();
    PagedCache one_shot = filled_cache(rng, w, 16);
    const std::vector<Token> tokens = all_tokens(w);
    const std::vector<float> want = attend(one_shot, w, tokens, nullptr);
    for (int rep = 0; rep < 2; ++rep) {
      PagedCache chunked = make_cache(rng, w, 16);
      std::vector<int64_t> done(w.seq_lens.size(), 0);
      std::vector<float> got(want.size(), 0.0f);
      bool any = true;
      while (any) {
        any = false;
        std::vector<Token> step;
        for (size_t s = 0; s < w.seq_lens.size(); ++s) {
          if (done[s] == w.seq_lens[s] || rng.next() % 4 == 0) continue;  // sometimes sits a step out
          const int64_t left = w.seq_lens[s] - done[s];
          const int64_t chunk = done[s] == 0     ? rng.uniform_int(1, left)
                                : rng.next() % 2 ? 1
                                                 : rng.uniform_int(1, std::min<int64_t>(left, 40));
          for (int64_t p = done[s]; p < done[s] + chunk; ++p)
            step.push_back({static_cast<int32_t>(s), static_cast<int32_t>(p)});
          done[s] += chunk;
        }
        for (size_t s = 0; s < w.seq_lens.size(); ++s) any = any || done[s] < w.seq_lens[s];
        if (step.empty()) continue;
        shuffle(rng, step);
        write_tokens(chunked, w, step);
        const std::vector<float> out = attend(chunked, w, step, rep == 0 ? nullptr : &pool2);
        for (size_t i = 0; i < step.size(); ++i) {
          size_t index = 0;  // the token's row in the one-shot output
          for (int32_t s = 0; s < step[i].seq; ++s) index += static_cast<size_t>(w.seq_lens[s]);
          index += static_cast<size_t>(step[i].pos);
          std::memcpy(&got[index * q_dim], &out[i * q_dim], sizeof(float) * q_dim);
        }
      }
      for (size_t t = 0; t < tokens.size(); ++t)
        ASSERT_TRUE(BitsEqual(&want[t * q_dim], &got[t * q_dim], q_dim))
            << label(w.heads) << " seq " << tokens[t].seq << " pos " << tokens[t].pos;
    }
  }
}

TEST(AttentionTest, BlockSizeAndPhysicalBlocksDoNotChangeBits) {
  Rng rng(74);
  for (const Config& cfg : configs()) {
    const Workload w = make_workload(rng, cfg.heads, cfg.seq_lens);
    const std::vector<Token> tokens = all_tokens(w);
    PagedCache base = filled_cache(rng, w, 16);
    const std::vector<float> want = attend(base, w, tokens, nullptr);
    for (int64_t block_size : {16, 8, 32, 5, 48}) {
      PagedCache c = filled_cache(rng, w, block_size);  // another random physical assignment
      EXPECT_TRUE(BitsEqual(want, attend(c, w, tokens, nullptr))) << label(w.heads) << " block_size " << block_size;
    }
  }
}

TEST(AttentionTest, ThreadCountDoesNotChangeBits) {
  Rng rng(75);
  ThreadPool pool1(1), pool2(2), pool3(3);
  for (const Config& cfg : configs()) {
    const Workload w = make_workload(rng, cfg.heads, cfg.seq_lens);
    PagedCache c = filled_cache(rng, w, 16);
    std::vector<Token> tokens = all_tokens(w);
    shuffle(rng, tokens);
    const std::vector<float> want = attend(c, w, tokens, nullptr);
    for (ThreadPool* pool : {&pool1, &pool2, &pool3})
      EXPECT_TRUE(BitsEqual(want, attend(c, w, tokens, pool))) << label(w.heads) << " threads " << pool->num_threads();
  }
}

TEST(WriteKvTest, RoundsOnceToBf16AtTheSlotAndRejectsBadSlots) {
  Rng rng(76);
  const int64_t kv_dim = 24, num_slots = 10, ldk = 30, ldv = 27;
  std::vector<uint16_t> k(num_slots * kv_dim, kBf16NaN), v(num_slots * kv_dim, kBf16NaN);
  const KvCacheLayer cache{k.data(), v.data(), num_slots};
  std::vector<float> kin = rng.normal_vector(3 * ldk), vin = rng.normal_vector(3 * ldv);
  kin[0] = 1.0f + 0x1p-8f;      // exactly halfway between two bf16: ties to even (down)
  kin[1] = 1.0f + 3 * 0x1p-8f;  // halfway, ties to even (up)
  kin[2] = -0.0f;
  const int64_t slots[] = {7, 0, 3};
  write_kv(kin.data(), ldk, vin.data(), ldv, slots, 3, kv_dim, cache);
  for (int64_t t = 0; t < 3; ++t) {
    for (int64_t i = 0; i < kv_dim; ++i) {
      const uint16_t kb = k[slots[t] * kv_dim + i], vb = v[slots[t] * kv_dim + i];
      EXPECT_EQ(kb, f32_to_bf16(kin[t * ldk + i])) << t << ", " << i;
      EXPECT_EQ(vb, f32_to_bf16(vin[t * ldv + i])) << t << ", " << i;
      // Nearest bf16: within half a bf16 ulp (≤ 2^-8 relative: 8 significant bits) of the input.
      EXPECT_LE(std::fabs(test::decode_bf16(kb) - kin[t * ldk + i]), 0x1p-8 * std::fabs(kin[t * ldk + i]));
    }
  }
  EXPECT_EQ(k[7 * kv_dim + 0], 0x3f80);  // 1 + 2^-8 → 1.0
  EXPECT_EQ(k[7 * kv_dim + 1], 0x3f82);  // 1 + 3·2^-8 → 1 + 2^-6
  EXPECT_EQ(k[7 * kv_dim + 2], 0x8000);  // −0 kept
  for (int64_t s : {1, 2, 4, 5, 6, 8, 9})
    for (int64_t i = 0; i < kv_dim; ++i) ASSERT_EQ(k[s * kv_dim + i], kBf16NaN) << "slot " << s << " written";
  for (int64_t bad : {int64_t{-1}, num_slots, int64_t{1} << 40}) {
    const int64_t bad_slots[] = {2, bad};
    try {
      write_kv(kin.data(), ldk, vin.data(), ldv, bad_slots, 2, kv_dim, cache);
      ADD_FAILURE() << "write_kv accepted slot " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::to_string(bad)), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace ditto

// Data: modifications seen on produced batches, amount, determinism, the
// validation split, Bigram-Backcopy, tokenizer round trips, malformed files.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <set>
#include <zstd.h>

#include "runtime/data/batches.h"
#include "runtime/data/corpus.h"
#include "runtime/data/tokenizer.h"
#include "runtime_test_util.h"

using namespace sink;
using namespace sink::rt;
using sinktest::TempDir;
using sinktest::write_file;

namespace {

std::vector<std::vector<int64_t>> rows(const torch::Tensor& t) {
  std::vector<std::vector<int64_t>> out;
  auto a = t.accessor<int64_t, 2>();
  for (int64_t b = 0; b < t.size(0); ++b) {
    std::vector<int64_t> r;
    for (int64_t k = 0; k < t.size(1); ++k) r.push_back(a[b][k]);
    out.push_back(r);
  }
  return out;
}

// A text corpus of `docs` documents; document k is made only of byte 33 + k
// (so every token says which document it came from), `len` bytes long.
std::string marked_corpus(const TempDir& dir, int docs, int len) {
  for (int k = 0; k < docs; ++k)
    write_file(dir.file("doc" + std::string(k < 10 ? "0" : "") + std::to_string(k) + ".txt"),
               std::string(len, char(33 + k)));
  return dir.file("doc*.txt");
}

// Documents of English-ish sentences, numbered so that every chunk differs.
std::string sentence_corpus(const TempDir& dir, int docs, int sentences) {
  const char* subjects[] = {"the cat", "a dog", "my friend", "the old man", "a small bird", "the teacher"};
  const char* verbs[] = {"sees", "likes", "finds", "paints", "follows", "remembers"};
  const char* objects[] = {"the river", "a red ball", "the garden", "some bread", "the moon", "a quiet song"};
  std::string jsonl;
  int n = 0;
  for (int d = 0; d < docs; ++d) {
    std::string text;
    for (int s = 0; s < sentences; ++s, ++n)
      text += std::string(subjects[n % 6]) + " " + verbs[(n / 6) % 6] + " " + objects[(n / 36) % 6] + " number " +
              std::to_string(n) + ". ";
    jsonl += "{\"text\": \"" + text + "\"}\n";
  }
  write_file(dir.file("corpus.jsonl"), jsonl);
  return dir.file("corpus.jsonl");
}

RunConfig cfg_of(const std::string& body) { return sinktest::config_of("experiment a extends micro { " + body + " }"); }

std::string text_data(const std::string& path, const std::string& extra = "") {
  return "data { corpus = file(\"" + path + "\")  tokenizer = bytes  bos = false  valid_fraction = 0.1 " + extra + " }";
}

}  // namespace

TEST(Batches, FixedTokenAtPosition) {
  auto cfg = cfg_of("data { fix token 5 at 2 }  train.batch = 8");
  ASSERT_EQ(cfg.data.fixed.size(), 1u);
  TokenData data = load_data(cfg.data, "");
  Batches batches(data, cfg.data, cfg.train.context, cfg.train.batch, cfg.train.seed);
  Batches plain(
      data,
      [&] {
        auto d = cfg.data;
        d.fixed.clear();
        return d;
      }(),
      cfg.train.context, cfg.train.batch, cfg.train.seed);
  int untouched_differs = 0;
  for (int64_t step : {0, 1, 7}) {
    auto [x, y] = batches.train(step);
    auto [px, py] = plain.train(step);
    for (int64_t b = 0; b < x.size(0); ++b) {
      EXPECT_EQ(x[b][1].item<int64_t>(), 5) << "step " << step << " row " << b;
      EXPECT_EQ(y[b][0].item<int64_t>(), 5);  // the target of position 1 is token 2
      if (px[b][1].item<int64_t>() != 5) ++untouched_differs;
      auto keep = torch::ones({x.size(1)}, torch::kBool);
      keep[1] = false;
      EXPECT_TRUE(torch::equal(x[b].masked_select(keep), px[b].masked_select(keep)));
    }
  }
  EXPECT_GT(untouched_differs, 0);  // the modification really changed something
  // Text corpora too, and through sequence().
  TempDir dir("fix");
  auto tcfg = cfg_of(text_data(sentence_corpus(dir, 10, 20), "fix token 7 at 3") + " train.batch = 4");
  TokenData tdata = load_data(tcfg.data, "");
  Batches tb(tdata, tcfg.data, tcfg.train.context, tcfg.train.batch, 0);
  for (int64_t index = 0; index < 5; ++index) EXPECT_EQ(tb.sequence(false, index, 16, false, true)[2], 7);
  auto [vx, vy] = tb.valid(3);
  for (int64_t b = 0; b < 3; ++b) EXPECT_EQ(vx[b][2].item<int64_t>(), 7);
}

TEST(Batches, RandomPositions) {
  TempDir dir("random");
  auto path = sentence_corpus(dir, 20, 30);
  auto cfg = cfg_of(text_data(path, "random at [1, 2]") + " train.batch = 16");
  ASSERT_EQ(cfg.data.random_positions, (std::vector<int64_t>{1, 2}));
  auto plain_cfg = cfg.data;
  plain_cfg.random_positions.clear();
  TokenData data = load_data(cfg.data, "");
  Batches batches(data, cfg.data, cfg.train.context, cfg.train.batch, 0);
  Batches plain(data, plain_cfg, cfg.train.context, cfg.train.batch, 0);
  std::set<int64_t> first, second;
  int changed = 0, total = 0;
  for (int64_t step = 0; step < 4; ++step) {
    auto [x, y] = batches.train(step);
    auto [px, py] = plain.train(step);
    for (int64_t b = 0; b < x.size(0); ++b) {
      for (int64_t p = 0; p < 2; ++p) {
        const int64_t t = x[b][p].item<int64_t>();
        EXPECT_GE(t, 0);
        EXPECT_LT(t, data.ordinary);  // bytes: no BOS / EOS drawn
        changed += t != px[b][p].item<int64_t>();
        ++total;
      }
      first.insert(x[b][0].item<int64_t>());
      second.insert(x[b][1].item<int64_t>());
      EXPECT_TRUE(torch::equal(x[b].narrow(0, 2, x.size(1) - 2), px[b].narrow(0, 2, x.size(1) - 2)));
      EXPECT_TRUE(torch::equal(y[b].narrow(0, 1, y.size(1) - 1), py[b].narrow(0, 1, y.size(1) - 1)));
      EXPECT_EQ(y[b][0].item<int64_t>(), x[b][1].item<int64_t>());  // targets shift the modified inputs
    }
  }
  EXPECT_EQ(data.ordinary, 256);
  // 64 chunks, uniform over 256 byte values: many distinct values, nearly all changed.
  EXPECT_GT(first.size(), 30u);
  EXPECT_GT(second.size(), 30u);
  EXPECT_GT(changed, total * 9 / 10);
  // Random tokens differ between positions 1 and 2 of one chunk and between chunks.
  auto s0 = batches.sequence(false, 0, 16, false, true), s1 = batches.sequence(false, 1, 16, false, true);
  EXPECT_FALSE(s0[0] == s1[0] && s0[1] == s1[1]);

  // first_token = random is random at [1], synthetic corpora draw from [0, ordinary).
  auto scfg = cfg_of("data { first_token = random  bos = false }  train.batch = 32");
  ASSERT_EQ(scfg.data.random_positions, (std::vector<int64_t>{1}));
  TokenData sdata = load_data(scfg.data, "");
  Batches sb(sdata, scfg.data, scfg.train.context, scfg.train.batch, 0);
  std::set<int64_t> values;
  auto [sx, sy] = sb.train(0);
  for (int64_t b = 0; b < sx.size(0); ++b) {
    values.insert(sx[b][0].item<int64_t>());
    EXPECT_LT(sx[b][0].item<int64_t>(), 16);
  }
  EXPECT_GT(values.size(), 8u);
}

TEST(Batches, BosFirst) {
  TempDir dir("bos");
  auto path = sentence_corpus(dir, 10, 20);
  auto with = cfg_of(text_data(path, "bos = true") + " train.batch = 8");
  ASSERT_TRUE(with.data.bos);
  TokenData data = load_data(with.data, "");
  Batches batches(data, with.data, with.train.context, with.train.batch, 0);
  for (int64_t step : {0, 3}) {
    auto [x, y] = batches.train(step);
    for (int64_t b = 0; b < x.size(0); ++b) {
      EXPECT_EQ(x[b][0].item<int64_t>(), data.bos);
      EXPECT_EQ((x[b].narrow(0, 1, x.size(1) - 1) == data.bos).sum().item<int64_t>(), 0);
      EXPECT_EQ((y[b] == data.bos).sum().item<int64_t>(), 0);
    }
  }
  auto [vx, vy] = batches.valid(4);
  EXPECT_TRUE((vx.select(1, 0) == data.bos).all().item<bool>());
  // Without bos no BOS appears anywhere.
  auto without = cfg_of(text_data(path) + " train.batch = 8");
  Batches nb(data, without.data, without.train.context, without.train.batch, 0);
  auto [nx, ny] = nb.train(0);
  EXPECT_EQ((nx == data.bos).sum().item<int64_t>(), 0);
  // Synthetic micro has bos = true: BOS = the synthetic vocab.
  auto syn = cfg_of("");
  TokenData sdata = load_data(syn.data, "");
  Batches sb(sdata, syn.data, syn.train.context, syn.train.batch, 0);
  auto [sx, sy] = sb.train(0);
  EXPECT_TRUE((sx.select(1, 0) == 16).all().item<bool>());
  EXPECT_EQ(sdata.bos, 16);
}

TEST(Batches, AmountLimitsDistinctChunks) {
  TempDir dir("amount");
  auto path = sentence_corpus(dir, 40, 30);
  // context 16, amount 161 tokens -> (161 - 1) / 16 = 10 chunks.
  auto cfg = cfg_of(text_data(path, "amount = 161 tokens") + " train.batch = 2");
  TokenData data = load_data(cfg.data, "");
  EXPECT_EQ(data.train.size(), 161u);
  Batches batches(data, cfg.data, cfg.train.context, cfg.train.batch, 0);
  ASSERT_EQ(batches.train_chunks(), 10);
  auto seen = [&](int64_t first_step, int64_t steps) {
    std::multiset<std::vector<int64_t>> s;
    for (int64_t step = first_step; step < first_step + steps; ++step) {
      auto [x, y] = batches.train(step);
      auto xr = rows(x), yr = rows(y);
      for (size_t b = 0; b < xr.size(); ++b) {
        xr[b].push_back(yr[b].back());
        s.insert(xr[b]);
      }
    }
    return s;
  };
  auto epoch1 = seen(0, 5), epoch2 = seen(5, 5), epoch3 = seen(10, 5);
  std::set<std::vector<int64_t>> distinct1(epoch1.begin(), epoch1.end());
  EXPECT_EQ(distinct1.size(), 10u);  // every chunk exactly once per epoch
  EXPECT_EQ(epoch1, epoch2);
  EXPECT_EQ(epoch1, epoch3);
  // Every chunk lies inside the first `amount` tokens of the training stream.
  for (const auto& chunk : distinct1) {
    bool found = false;
    for (size_t start = 0; start + chunk.size() <= data.train.size() && !found; ++start)
      found = std::equal(chunk.begin(), chunk.end(), data.train.begin() + static_cast<long>(start));
    EXPECT_TRUE(found);
  }
  // The epochs are shuffled differently.
  auto [a, b0] = batches.train(0);
  auto [c, d0] = batches.train(5);
  auto [e, f0] = batches.train(10);
  EXPECT_FALSE(torch::equal(a, c) && torch::equal(c, e));

  // Synthetic: amount = 64 tokens with context 16 -> 4 distinct sequences.
  auto scfg = cfg_of("data.amount = 64 tokens  train.batch = 2");
  TokenData sdata = load_data(scfg.data, "");
  Batches sb(sdata, scfg.data, scfg.train.context, scfg.train.batch, 0);
  ASSERT_EQ(sb.train_chunks(), 4);
  std::set<std::vector<int64_t>> syn;
  for (int64_t step = 0; step < 20; ++step) {
    auto [x, y] = sb.train(step);
    for (auto& r : rows(x)) syn.insert(r);
  }
  EXPECT_EQ(syn.size(), 4u);
  // Without amount, synthetic data never repeats.
  auto ucfg = cfg_of("train.batch = 2");
  Batches ub(sdata, ucfg.data, ucfg.train.context, ucfg.train.batch, 0);
  std::set<std::vector<int64_t>> unlimited;
  for (int64_t step = 0; step < 20; ++step) {
    auto [x, y] = ub.train(step);
    for (auto& r : rows(x)) unlimited.insert(r);
  }
  EXPECT_EQ(unlimited.size(), 40u);
}

TEST(Batches, DeterministicBySeed) {
  TempDir dir("det");
  auto path = sentence_corpus(dir, 30, 30);
  for (const std::string body : {std::string(""), text_data(path, "random at [2]")}) {
    SCOPED_TRACE(body.empty() ? "synthetic" : "text");
    auto cfg = cfg_of(body + " train.batch = 4");
    TokenData data = load_data(cfg.data, "");
    Batches a(data, cfg.data, cfg.train.context, cfg.train.batch, 7);
    Batches b(data, cfg.data, cfg.train.context, cfg.train.batch, 7);
    Batches other(data, cfg.data, cfg.train.context, cfg.train.batch, 8);
    // b is visited out of order: batches are a pure function of the step.
    std::vector<int64_t> steps = {0, 1, 2, 9, 3, 40};
    std::vector<torch::Tensor> from_a;
    for (int64_t s : steps) from_a.push_back(a.train(s).first);
    for (int k = int(steps.size()) - 1; k >= 0; --k)
      EXPECT_TRUE(torch::equal(b.train(steps[k]).first, from_a[k])) << steps[k];
    EXPECT_TRUE(torch::equal(a.train(3).second, b.train(3).second));
    int differ = 0;
    for (int64_t s : steps) differ += !torch::equal(other.train(s).first, a.train(s).first);
    EXPECT_GT(differ, 0);
    EXPECT_TRUE(torch::equal(a.valid(4).first, b.valid(4).first));
    EXPECT_TRUE(torch::equal(a.measure_inputs(4, 16, sink::MeasureInput::random, false),
                             b.measure_inputs(4, 16, sink::MeasureInput::random, false)));
  }
}

TEST(Batches, ValidationIsDisjointFromTraining) {
  TempDir dir("valid");
  // 40 documents, 10 % validation: documents 36..39 (bytes 69..72) are held out.
  auto cfg = cfg_of(text_data(marked_corpus(dir, 40, 50)) + " train.batch = 8");
  TokenData data = load_data(cfg.data, "");
  std::set<int32_t> train_tokens(data.train.begin(), data.train.end()),
      valid_tokens(data.valid.begin(), data.valid.end());
  for (int32_t t : valid_tokens) EXPECT_TRUE(t == data.eos || (t >= 33 + 36 && t < 33 + 40)) << t;
  for (int32_t t : train_tokens) EXPECT_TRUE(t == data.eos || (t >= 33 && t < 33 + 36)) << t;
  EXPECT_EQ(valid_tokens.size(), 5u);  // four documents + EOS
  Batches batches(data, cfg.data, cfg.train.context, cfg.train.batch, 0);
  auto [vx, vy] = batches.valid(20);
  EXPECT_TRUE(((vx >= 33 + 36) | (vx == data.eos)).all().item<bool>());
  auto mx = batches.measure_inputs(10, 16, sink::MeasureInput::natural, false);
  EXPECT_TRUE(((mx >= 33 + 36) | (mx == data.eos)).all().item<bool>());
  for (int64_t step = 0; step < 20; ++step) {
    auto [x, y] = batches.train(step);
    EXPECT_TRUE(((x < 33 + 36) | (x == data.eos)).all().item<bool>());
  }

  // Synthetic: validation sequences are never training sequences.
  auto scfg = cfg_of("train.batch = 8");
  TokenData sdata = load_data(scfg.data, "");
  Batches sb(sdata, scfg.data, scfg.train.context, scfg.train.batch, 0);
  std::set<std::vector<int64_t>> train;
  for (int64_t step = 0; step < 50; ++step)
    for (auto& r : rows(sb.train(step).first)) train.insert(r);
  for (auto& r : rows(sb.valid(32).first)) EXPECT_EQ(train.count(r), 0u);
}

TEST(Corpus, BigramBackcopyCopiesAfterTriggers) {
  // Triggers 0..2 with offsets 1, 2, 3: after trigger t at index a, the next
  // token is the one offsets[t] positions before the trigger (index a - offsets[t]).
  const std::vector<int64_t> offsets = {1, 2, 3};
  BigramBackcopy gen(24, 3, offsets, 0.1, 5);
  std::mt19937_64 rng(1);
  int copies = 0, ordinary_checked = 0;
  for (int n = 0; n < 50; ++n) {
    auto s = gen.sample(64, rng);
    ASSERT_EQ(s.size(), 64u);
    EXPECT_GE(s[0], 3);  // starts with a non-trigger
    for (size_t a = 0; a + 1 < s.size(); ++a) {
      EXPECT_GE(s[a], 0);
      EXPECT_LT(s[a], 24);
      if (s[a] < 3 && int64_t(a) >= offsets[s[a]]) {
        EXPECT_EQ(s[a + 1], s[a - offsets[s[a]]]) << "sequence " << n << " at " << a;
        ++copies;
      } else {
        ++ordinary_checked;
      }
    }
  }
  EXPECT_GT(copies, 50);
  // A single offset applies to every trigger; through Batches (BOS first, then the body).
  auto cfg = cfg_of("train.batch = 8");  // micro: vocab 16, triggers 2, offsets [1]
  ASSERT_EQ(cfg.data.offsets, (std::vector<int64_t>{1}));
  TokenData data = load_data(cfg.data, "");
  Batches batches(data, cfg.data, cfg.train.context, cfg.train.batch, 0);
  int through_batches = 0;
  for (int64_t step = 0; step < 10; ++step) {
    auto [x, y] = batches.train(step);
    auto xr = rows(x), yr = rows(y);
    for (size_t b = 0; b < xr.size(); ++b) {
      EXPECT_EQ(xr[b][0], data.bos);
      // Input position p (>= 2, so a token exists one before it) holds a trigger: target p is input p - 1.
      for (size_t p = 2; p < xr[b].size(); ++p)
        if (xr[b][p] < 2) {
          EXPECT_EQ(yr[b][p], xr[b][p - 1]);
          ++through_batches;
        }
    }
  }
  EXPECT_GT(through_batches, 5);
  // The sparse bigram table: each token has a few likely successors, not uniform ones.
  std::map<int32_t, std::map<int32_t, int>> follows;
  std::mt19937_64 rng2(3);
  for (int n = 0; n < 200; ++n) {
    auto s = gen.sample(64, rng2);
    for (size_t a = 0; a + 1 < s.size(); ++a)
      if (s[a] >= 3) follows[s[a]][s[a + 1]]++;
  }
  int concentrated = 0;
  for (auto& [tok, next] : follows) {
    int total = 0, best = 0;
    for (auto& [t, c] : next) total += c, best = std::max(best, c);
    if (total >= 50 && best > total / 5) ++concentrated;  // uniform would give ~1/24
  }
  EXPECT_GT(concentrated, 5);
}

TEST(Tokenizer, BytesRoundTrip) {
  auto tok = byte_tokenizer();
  const std::string texts[] = {"", "hello, world", "héllo wörld ✓ 日本語 🙂 ñ", std::string("nul\0inside", 10)};
  for (const auto& s : texts) {
    auto ids = tok->encode(s);
    EXPECT_EQ(ids.size(), s.size());
    EXPECT_EQ(tok->decode(ids), s);
  }
  std::string all;
  for (int b = 0; b < 256; ++b) all += char(b);
  EXPECT_EQ(tok->decode(tok->encode(all)), all);
  EXPECT_EQ(tok->encode("é"), (std::vector<int32_t>{0xC3, 0xA9}));
  EXPECT_EQ(tok->vocab(), 258);
  // BOS / EOS are dropped when decoding.
  EXPECT_EQ(tok->decode({tok->bos(), 'a', tok->eos(), 'b'}), "ab");
}

TEST(Tokenizer, Llama2cRoundTrip) {
  SINKLAB_TEST_MODEL(tok512, "tok512.bin");
  auto tok = llama2c_tokenizer(tok512, 512);
  EXPECT_EQ(tok->vocab(), 512);
  const std::string sentences[] = {
      "Once upon a time, there was a little girl named Lily.",
      "She loved to play outside in the park with her friends.",
      "The big brown dog jumped over the fence and ran away!",
      "\"Why?\" asked Tom. His mom smiled and said: it is 3 o'clock.",
      "A café serves crème brûlée.",  // byte fallback for non-ASCII
  };
  for (const auto& s : sentences) {
    auto ids = tok->encode(s);
    EXPECT_LT(ids.size(), s.size());  // BPE merges something
    for (int32_t id : ids) {
      EXPECT_GE(id, 3);
      EXPECT_LT(id, 512);
    }
    EXPECT_EQ(tok->decode(ids), s);
  }
  // The same ids as SentencePiece itself on the model tok512.bin was exported from.
  const auto spm_model = sinktest::find_test_model("tok512.model");
  if (spm_model.path.empty()) GTEST_SKIP() << "the comparison with SentencePiece did not run: " << spm_model.message;
  if (std::system("command -v spm_encode > /dev/null 2>&1") != 0)
    GTEST_SKIP()
        << "the comparison with SentencePiece did not run: spm_encode (Debian's sentencepiece) is not on the PATH";
  {
    TempDir dir("spm512");
    std::string in;
    for (int k = 0; k < 4; ++k) in += sentences[k] + "\n";
    write_file(dir.file("in.txt"), in);
    std::string cmd = "spm_encode --model=" + spm_model.path + " --output_format=id < " + dir.file("in.txt") + " > " +
                      dir.file("out.txt");
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    std::istringstream lines(sinktest::read_file(dir.file("out.txt")));
    std::string line;
    for (int k = 0; k < 4 && std::getline(lines, line); ++k) {
      std::vector<int32_t> want;
      std::istringstream ss(line);
      int32_t id;
      while (ss >> id) want.push_back(id);
      EXPECT_EQ(tok->encode(sentences[k]), want) << sentences[k];
    }
  }
}

TEST(Tokenizer, SentencePieceRoundTrip) {
  if (std::system("command -v spm_train > /dev/null 2>&1 && command -v spm_encode > /dev/null 2>&1 && "
                  "command -v spm_decode > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "spm_train / spm_encode / spm_decode not on PATH";
  TempDir dir("spm");
  const char* names[] = {"Anna", "Ben", "Clara", "David", "Eva", "Felix", "Greta", "Hugo"};
  const char* verbs[] = {"walks to", "looks at", "talks about", "dreams of", "writes to", "waits for"};
  const char* places[] = {"the market", "a green hill", "the station", "an old library", "the blue sea"};
  std::vector<std::string> docs;
  for (int n = 0; n < 300; ++n)
    docs.push_back(std::string(names[n % 8]) + " " + verbs[(n / 8) % 6] + " " + places[(n / 48) % 5] + " on day " +
                   std::to_string(n % 31 + 1) + ".");
  // With byte fallback the vocabulary holds 256 byte pieces, 3 specials and
  // the corpus's characters: ~300 is the smallest that trains.
  auto tok = sentencepiece_tokenizer(docs, 320, dir.str());
  EXPECT_EQ(tok->vocab(), 320);
  const std::string tests[] = {"Anna walks to the market on day 3.", "Hugo dreams of an old library.",
                               "Felix writes to Greta on day 17.",
                               "Zebras yodel quietly."};  // unseen words: byte fallback
  auto all = tok->encode_all({tests[0], tests[1], tests[2], tests[3]});
  ASSERT_EQ(all.size(), 4u);
  for (int k = 0; k < 4; ++k) {
    SCOPED_TRACE(tests[k]);
    auto ids = tok->encode(tests[k]);
    EXPECT_EQ(ids, all[k]);
    ASSERT_FALSE(ids.empty());
    for (int32_t id : ids) {
      EXPECT_GE(id, 0);
      EXPECT_LT(id, 320);
    }
    EXPECT_EQ(tok->decode(ids), tests[k]);
  }
  EXPECT_LT(all[0].size(), tests[0].size());  // merges learned
  // The trained model is cached: a second request reuses it.
  int models = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path)) models += e.path().extension() == ".model";
  auto again = sentencepiece_tokenizer(docs, 320, dir.str());
  int models_after = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path)) models_after += e.path().extension() == ".model";
  EXPECT_EQ(models, 1);
  EXPECT_EQ(models_after, 1);
  EXPECT_EQ(again->encode(tests[1]), all[1]);
  // Too small a vocabulary: a clear error saying why.
  try {
    sentencepiece_tokenizer(docs, 100, dir.str());
    ADD_FAILURE() << "vocab 100 trained";
  } catch (const std::runtime_error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("vocab = 100"), std::string::npos) << what;
    EXPECT_NE(what.find("required_chars"), std::string::npos) << what;
  }
}

namespace {

// Runs f, expecting a std::runtime_error whose message contains every needle.
template <class F>
void expect_error(F f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    std::string what = e.what();
    for (const auto& n : needles) EXPECT_NE(what.find(n), std::string::npos) << "'" << what << "' lacks '" << n << "'";
  }
}

std::string zstd(const std::string& text) {
  std::string out(ZSTD_compressBound(text.size()), '\0');
  size_t n = ZSTD_compress(out.data(), out.size(), text.data(), text.size(), 3);
  out.resize(n);
  return out;
}

}  // namespace

TEST(Corpus, ReadsTextJsonlZstAndBin) {
  TempDir dir("read");
  write_file(dir.file("a.jsonl"), "{\"text\": \"first\"}\n\n{\"text\": \"second\", \"meta\": 1}\n");
  write_file(dir.file("b.jsonl.zst"), zstd("{\"text\": \"third\"}\n{\"text\": \"fourth\"}\n"));
  write_file(dir.file("c.txt"), "fifth\nline two");
  EXPECT_EQ(read_documents(dir.file("a.jsonl"), nullptr), (std::vector<std::string>{"first", "second"}));
  EXPECT_EQ(read_documents(dir.file("b.jsonl.zst"), nullptr), (std::vector<std::string>{"third", "fourth"}));
  EXPECT_EQ(read_documents(dir.file("c.txt"), nullptr), (std::vector<std::string>{"fifth\nline two"}));
  write_file(dir.file("t.bin"), std::string("\x01\x00\x02\x01", 4));
  std::vector<int32_t> tokens;
  EXPECT_TRUE(read_documents(dir.file("t.bin"), &tokens).empty());
  EXPECT_EQ(tokens, (std::vector<int32_t>{1, 258}));
}

TEST(Corpus, MalformedFilesGiveClearErrors) {
  TempDir dir("bad");
  const std::string bad_jsonl = dir.file("bad.jsonl");
  write_file(bad_jsonl, "{\"text\": \"fine\"}\n{\"text\": broken\n{\"text\": \"fine\"}\n");
  expect_error([&] { read_documents(bad_jsonl, nullptr); }, {bad_jsonl, ":2"});
  const std::string no_text = dir.file("notext.jsonl");
  write_file(no_text, "{\"body\": \"x\"}\n");
  expect_error([&] { read_documents(no_text, nullptr); }, {no_text, "text"});

  std::string packed = zstd(std::string(20000, 'x') + "{\"text\": \"a\"}\n");
  ASSERT_GT(packed.size(), 20u);
  const std::string truncated = dir.file("trunc.jsonl.zst");
  write_file(truncated, packed.substr(0, packed.size() / 2));
  expect_error([&] { read_documents(truncated, nullptr); }, {truncated});
  const std::string garbage = dir.file("garbage.jsonl.zst");
  write_file(garbage, "this is not zstd at all");
  expect_error([&] { read_documents(garbage, nullptr); }, {garbage});

  const std::string odd = dir.file("odd.bin");
  write_file(odd, std::string("\x01\x00\x02", 3));
  std::vector<int32_t> tokens;
  expect_error([&] { read_documents(odd, &tokens); }, {odd, "odd"});

  expect_error([&] { read_documents(dir.file("missing-*.jsonl"), nullptr); }, {"missing-*.jsonl"});

  // Through load_data, as a run sees it.
  auto cfg = cfg_of(text_data(bad_jsonl));
  expect_error([&] { load_data(cfg.data, ""); }, {bad_jsonl});
  auto tcfg = cfg_of(text_data(truncated));
  expect_error([&] { load_data(tcfg.data, ""); }, {truncated});

  // A bad tokenizer file.
  const std::string bad_tok = dir.file("tok.bin");
  write_file(bad_tok, std::string("\xff\xff\xff\xff", 4));
  expect_error([&] { llama2c_tokenizer(bad_tok, 0); }, {bad_tok});
  // A well-formed one (512 pieces, as tok512.bin), cut mid-token.
  std::string good(4, '\0');
  const int32_t max_len = 8;
  std::memcpy(good.data(), &max_len, 4);
  for (int32_t k = 0; k < 512; ++k) {
    const std::string piece = fmt::format("p{}", k);  // (not "p" + ...: a false GCC 12 -Wrestrict)
    const float score = -static_cast<float>(k);
    const int32_t len = static_cast<int32_t>(piece.size());
    good.append(reinterpret_cast<const char*>(&score), 4).append(reinterpret_cast<const char*>(&len), 4).append(piece);
  }
  write_file(bad_tok, good);
  EXPECT_EQ(llama2c_tokenizer(bad_tok, 512)->vocab(), 512);
  write_file(bad_tok, good.substr(0, good.size() / 2 + 3));
  expect_error([&] { llama2c_tokenizer(bad_tok, 512); }, {bad_tok});
}

// valid(n) is the first n validation sequences, modified like training chunks: row b holds
// sequence(validation, b) shifted by one for the targets.
TEST(Batches, ValidationRowsAreTheValidationSequences) {
  auto cfg = cfg_of("data { random at [3] }");
  TokenData data = load_data(cfg.data, "");
  Batches batches(data, cfg.data, cfg.train.context, cfg.train.batch, 7);
  auto [x, y] = batches.valid(5);
  ASSERT_EQ(x.sizes(), (std::vector<int64_t>{5, cfg.train.context}));
  ASSERT_EQ(y.sizes(), x.sizes());
  for (int64_t b = 0; b < 5; ++b) {
    const auto seq = batches.sequence(true, b, cfg.train.context, cfg.data.bos, true);
    for (int64_t t = 0; t < cfg.train.context; ++t) {
      EXPECT_EQ(x[b][t].item<int64_t>(), seq[t]) << b << "," << t;
      EXPECT_EQ(y[b][t].item<int64_t>(), seq[t + 1]) << b << "," << t;
    }
  }
}

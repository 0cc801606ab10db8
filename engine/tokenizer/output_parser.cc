#include "engine/tokenizer/output_parser.h"

#include <simdjson.h>

#include <algorithm>
#include <utility>

#include "engine/tokenizer/v4_format.h"

namespace deepinfer {
namespace {

using v4::kDsmlTagStart;
using v4::kEos;
using v4::kInvokeClose;
using v4::kInvokeOpen;
using v4::kParamClose;
using v4::kParamOpen;
using v4::kThinkEnd;
using v4::kToolCallsClose;
using v4::kToolCallsOpen;

constexpr std::string_view kToolCallsName = "tool_calls>";
constexpr size_t kNpos = std::string_view::npos;

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool IsProperPrefix(std::string_view s, std::string_view of) {
  return s.size() < of.size() && StartsWith(of, s);
}

// Length of the longest suffix of `s` that is a proper prefix of `marker`.
size_t PartialSuffix(std::string_view s, std::string_view marker) {
  for (size_t k = std::min(s.size(), marker.size() - 1); k > 0; --k) {
    if (s.substr(s.size() - k) == marker.substr(0, k)) return k;
  }
  return 0;
}

void SkipSpace(std::string_view* s) {
  while (!s->empty() && IsSpace(s->front())) s->remove_prefix(1);
}

bool Consume(std::string_view* s, std::string_view lit) {
  if (!StartsWith(*s, lit)) return false;
  s->remove_prefix(lit.size());
  return true;
}

std::string Snippet(std::string_view s) {
  constexpr size_t kMax = 40;
  return "'" + std::string(s.substr(0, kMax)) + (s.size() > kMax ? "...'" : "'");
}

// Reads `attr="VALUE"` (after optional whitespace); false if it is not there.
bool ReadAttribute(std::string_view* s, std::string_view attr, std::string_view* value) {
  SkipSpace(s);
  if (!Consume(s, attr) || !Consume(s, "=\"")) return false;
  const size_t q = s->find('"');
  if (q == kNpos) return false;
  *value = s->substr(0, q);
  s->remove_prefix(q + 1);
  return true;
}

// Parses one complete "<｜DSML｜invoke ...>...</｜DSML｜invoke>" into a call whose arguments are
// written like the official decoder: {"key": value, ...}.
Status ParseInvoke(std::string_view s, ToolCall* call) {
  s.remove_prefix(kInvokeOpen.size());
  s.remove_suffix(kInvokeClose.size());
  std::string_view name;
  if (!ReadAttribute(&s, "name", &name) || name.empty()) {
    return InvalidArgument("DSML invoke without a tool name");
  }
  SkipSpace(&s);
  if (!Consume(&s, ">"))
    return InvalidArgument("malformed DSML invoke tag for '" + std::string(name) + "'");
  const std::string where = "tool call '" + std::string(name) + "': ";
  std::vector<std::string_view> keys;
  std::string args = "{";
  simdjson::dom::parser parser;
  while (true) {
    SkipSpace(&s);
    if (s.empty()) break;
    if (!Consume(&s, kParamOpen)) return InvalidArgument(where + "unexpected text " + Snippet(s));
    std::string_view key, flag;
    if (!ReadAttribute(&s, "name", &key) || key.empty()) {
      return InvalidArgument(where + "parameter without a name");
    }
    const std::string param = where + "parameter '" + std::string(key) + "': ";
    if (!ReadAttribute(&s, "string", &flag) || (flag != "true" && flag != "false")) {
      return InvalidArgument(param + "missing or bad string=\"true|false\" attribute");
    }
    SkipSpace(&s);
    if (!Consume(&s, ">")) return InvalidArgument(param + "malformed tag");
    const size_t end = s.find(kParamClose);
    if (end == kNpos) return InvalidArgument(param + "not closed");
    const std::string_view value = s.substr(0, end);
    s.remove_prefix(end + kParamClose.size());
    // A parameter tag inside the value means the previous one was never closed.
    if (value.find(kParamOpen) != kNpos) return InvalidArgument(param + "not closed");
    if (std::find(keys.begin(), keys.end(), key) != keys.end()) {
      return InvalidArgument(param + "given twice");
    }
    keys.push_back(key);
    if (keys.size() > 1) args += ", ";
    v4::AppendPyJsonString(key, &args);
    args += ": ";
    if (flag == "true") {
      v4::AppendPyJsonString(value, &args);
    } else {
      simdjson::dom::element ignored;
      if (parser.parse(value.data(), value.size()).get(ignored) != simdjson::SUCCESS) {
        return InvalidArgument(param +
                               "string=\"false\" value is not valid JSON: " + Snippet(value));
      }
      args += value;
    }
  }
  args += "}";
  call->name = std::string(name);
  call->arguments_json = std::move(args);
  return Status::Ok();
}

}  // namespace

V4OutputParser::V4OutputParser(bool thinking_mode_started)
    : state_(thinking_mode_started ? State::kReasoning : State::kContent) {}

Status V4OutputParser::Push(std::string_view text_chunk, ParsedDelta* out) {
  if (!error_.ok()) return error_;
  if (finished_) return InvalidArgument("V4OutputParser: Push after Finish");
  buf_.append(text_chunk);
  return Process(false, out);
}

Status V4OutputParser::Finish(ParsedDelta* out) {
  if (!error_.ok()) return error_;
  if (finished_) return Status::Ok();
  finished_ = true;
  return Process(true, out);
}

Status V4OutputParser::Fail(Status status) {
  error_ = std::move(status);
  return error_;
}

Status V4OutputParser::Process(bool final, ParsedDelta* out) {
  bool progressed = true;
  while (progressed) {
    progressed = false;
    switch (state_) {
      case State::kReasoning:
      case State::kContent:
        DI_RETURN_IF_ERROR(ProcessText(final, out, &progressed));
        break;
      case State::kToolBlock:
        DI_RETURN_IF_ERROR(ProcessToolBlock(final, out, &progressed));
        break;
      case State::kAfterBlock: {
        size_t ws = 0;
        while (ws < buf_.size() && IsSpace(buf_[ws])) ++ws;
        buf_.erase(0, ws);
        if (buf_.empty()) break;
        if (StartsWith(buf_, kEos)) {
          buf_.erase(0, kEos.size());
          state_ = State::kDone;
          progressed = true;
        } else if (final || !IsProperPrefix(buf_, kEos)) {
          return Fail(InvalidArgument("unexpected text after the tool-call block"));
        }
        break;
      }
      case State::kDone:
        if (!buf_.empty()) {
          return Fail(InvalidArgument("text after the end-of-sentence marker"));
        }
        break;
    }
  }
  return Status::Ok();
}

// Reasoning or content: find the earliest complete marker, emit the text before it, and hold
// back any suffix that may still turn into one.
Status V4OutputParser::ProcessText(bool final, ParsedDelta* out, bool* progressed) {
  const bool reasoning = state_ == State::kReasoning;
  std::string& dst = reasoning ? out->reasoning : out->content;
  const std::string_view b = buf_;
  const size_t p_think = reasoning ? b.find(kThinkEnd) : kNpos;
  const size_t p_eos = b.find(kEos);
  // In content every DSML tag must open a tool-call block; reasoning may mention other tags.
  const size_t p_dsml = reasoning ? b.find(kToolCallsOpen) : b.find(kDsmlTagStart);
  const size_t p = std::min({p_think, p_eos, p_dsml});
  if (p != kNpos && p == p_dsml) {
    const std::string_view rest = b.substr(p + kDsmlTagStart.size());
    if (StartsWith(rest, kToolCallsName)) {
      size_t text_end = p;  // the "\n\n" before the block belongs to the block
      while (text_end > 0 && p - text_end < 2 && b[text_end - 1] == '\n') --text_end;
      dst.append(b.substr(0, text_end));
      buf_.erase(0, p + kToolCallsOpen.size());
      state_ = State::kToolBlock;
      search_from_ = 0;
      *progressed = true;
      return Status::Ok();
    }
    if (!IsProperPrefix(rest, kToolCallsName)) {
      return Fail(InvalidArgument("unexpected DSML tag in the content (only " +
                                  std::string(kToolCallsOpen) + " may appear there)"));
    }
    // An unfinished "<｜DSML｜tool_calls>" reaching the end of the buffer: handled below.
  } else if (p != kNpos) {
    dst.append(b.substr(0, p));
    if (p == p_eos) {
      buf_.erase(0, p + kEos.size());
      state_ = State::kDone;
    } else {
      buf_.erase(0, p + kThinkEnd.size());
      state_ = State::kContent;
    }
    *progressed = true;
    return Status::Ok();
  }
  if (final) {  // an unfinished marker at the very end is plain text
    dst.append(b);
    buf_.clear();
    return Status::Ok();
  }
  size_t hold = std::max(PartialSuffix(b, kEos), PartialSuffix(b, kToolCallsOpen));
  if (reasoning) hold = std::max(hold, PartialSuffix(b, kThinkEnd));
  size_t keep_from = b.size() - hold;
  for (int nl = 0; nl < 2 && keep_from > 0 && b[keep_from - 1] == '\n'; ++nl) --keep_from;
  dst.append(b.substr(0, keep_from));
  buf_.erase(0, keep_from);
  return Status::Ok();
}

// Inside <｜DSML｜tool_calls>: whitespace, complete invokes, then </｜DSML｜tool_calls>.
Status V4OutputParser::ProcessToolBlock(bool final, ParsedDelta* out, bool* progressed) {
  size_t ws = 0;
  while (ws < buf_.size() && IsSpace(buf_[ws])) ++ws;
  if (ws > 0) {
    buf_.erase(0, ws);
    search_from_ = 0;
  }
  const std::string_view b = buf_;
  const Status unterminated = InvalidArgument("unterminated DSML tool-call block");
  if (StartsWith(b, kToolCallsClose)) {
    buf_.erase(0, kToolCallsClose.size());
    state_ = State::kAfterBlock;
    *progressed = true;
    return Status::Ok();
  }
  if (StartsWith(b, kInvokeOpen)) {
    const size_t from = std::max(search_from_, kInvokeOpen.size());
    const size_t end = b.find(kInvokeClose, from);
    const size_t block_end = b.find(kToolCallsClose, from);
    if (block_end != kNpos && (end == kNpos || block_end < end)) {
      return Fail(InvalidArgument("DSML invoke not closed before the end of the block"));
    }
    if (end == kNpos) {
      if (final) return Fail(unterminated);
      const size_t longest = std::max(kInvokeClose.size(), kToolCallsClose.size());
      search_from_ = b.size() >= longest ? b.size() - longest + 1 : 0;
      return Status::Ok();
    }
    ToolCall call;
    const Status st = ParseInvoke(b.substr(0, end + kInvokeClose.size()), &call);
    if (!st.ok()) return Fail(st);
    out->tool_calls.push_back(std::move(call));
    buf_.erase(0, end + kInvokeClose.size());
    search_from_ = 0;
    *progressed = true;
    return Status::Ok();
  }
  if (b.empty() || IsProperPrefix(b, kToolCallsClose) || IsProperPrefix(b, kInvokeOpen)) {
    return final ? Fail(unterminated) : Status::Ok();
  }
  return Fail(InvalidArgument("unexpected text in the DSML tool-call block"));
}

Result<ParsedOutput> ParseV4Output(std::string_view full_text, bool thinking) {
  V4OutputParser parser(thinking);
  ParsedDelta delta;
  DI_RETURN_IF_ERROR(parser.Push(full_text, &delta));
  DI_RETURN_IF_ERROR(parser.Finish(&delta));
  ParsedOutput out;
  out.reasoning = std::move(delta.reasoning);
  out.content = std::move(delta.content);
  out.tool_calls = std::move(delta.tool_calls);
  out.saw_eos = parser.saw_eos();
  return out;
}

}  // namespace deepinfer

// Parsing of DeepSeek-V4 generated text into reasoning, content and DSML tool calls, streaming
// (chunk by chunk as tokens are detokenized) or in one shot.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "engine/common/status.h"
#include "engine/tokenizer/chat.h"

namespace deepinfer {

/// What one Push/Finish made certain. Push and Finish append to these fields.
struct ParsedDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> tool_calls;  // complete calls; id left empty for the caller to assign
};

struct ParsedOutput {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> tool_calls;
  bool saw_eos = false;  // the text contained <｜end▁of▁sentence｜>
};

/// Streaming parser of model output. Layout of the text:
///   [reasoning "</think>"] content ["\n\n" DSML tool_calls block] [EOS]
/// In thinking mode the text starts inside the reasoning (the prompt ended with <think>).
/// A suffix that could still become a marker (</think>, <｜DSML｜tool_calls>, EOS, and the up to
/// two newlines that precede a tool-call block) is held back until the next chunk decides it, so
/// any chunking of the same text yields the same concatenated result.
///
/// Tool calls: each <｜DSML｜invoke name="N"> becomes ToolCall{name, arguments_json} as soon as
/// its </｜DSML｜invoke> arrives; string="true" parameters become JSON strings, string="false"
/// ones must be valid JSON and are inserted as they are. Malformed DSML (missing name, bad JSON,
/// unknown tags, unclosed parameter, text after the block) is InvalidArgument; after an error
/// every further call returns the same error.
class V4OutputParser {
 public:
  explicit V4OutputParser(bool thinking_mode_started);

  /// Appends to `out` what `text_chunk` made certain.
  Status Push(std::string_view text_chunk, ParsedDelta* out);
  /// Flushes held-back text (an unfinished marker prefix is plain text). An unterminated
  /// tool-call block is InvalidArgument.
  Status Finish(ParsedDelta* out);

  /// True once the end-of-sentence marker has been seen.
  bool saw_eos() const { return state_ == State::kDone; }

 private:
  enum class State { kReasoning, kContent, kToolBlock, kAfterBlock, kDone };

  Status Process(bool final, ParsedDelta* out);
  Status ProcessText(bool final, ParsedDelta* out, bool* progressed);
  Status ProcessToolBlock(bool final, ParsedDelta* out, bool* progressed);
  Status Fail(Status status);

  State state_;
  std::string buf_;         // text not yet attributed
  size_t search_from_ = 0;  // tool block: where to resume looking for </｜DSML｜invoke>
  bool finished_ = false;
  Status error_;
};

/// One-shot parse of a whole generation, built on V4OutputParser.
Result<ParsedOutput> ParseV4Output(std::string_view full_text, bool thinking);

}  // namespace deepinfer

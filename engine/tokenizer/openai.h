// OpenAI chat-completions conversion: the request body (JSON) to ChatMessage / ChatOptions /
// SamplingParams, and generated text back to `chat.completion` and `chat.completion.chunk`
// objects. docs/openai.md lists the accepted fields, their ranges and the extensions.
//
//   ParseLimits limits;
//   limits.vocab_size = 129280;
//   Result<ChatCompletionRequest> req = ParseChatCompletionRequest(body, limits);
//   if (!req.ok()) return Reply(ErrorResponseJson(req.status()));
//
// Errors are InvalidArgument and start with the JSON path of the offending field
// ("messages[2].content: expected a string or an array of content parts, got a number").
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/common/status.h"
#include "engine/tokenizer/chat.h"

namespace deepinfer {

// ---------------------------------------------------------------------------------------------
// Request side.

/// Bounds on what one request may ask for. Zero means "no bound" where noted.
struct ParseLimits {
  size_t max_body_bytes = 32u << 20;  // the whole JSON body
  size_t max_messages = 8192;
  size_t max_tools = 1024;
  size_t max_stop = 16;             // stop strings
  size_t max_stop_token_ids = 256;  // stop_token_ids
  size_t max_logit_bias = 1024;     // logit_bias entries
  int vocab_size = 0;               // > 0: token ids (logit_bias, stop_token_ids) must be below
  int64_t max_tokens = 0;           // > 0: max_tokens / max_completion_tokens may not exceed it
};

/// Sampling and stopping, validated. Defaults are the neutral values (DeepSeek's card: T = 1,
/// top_p = 1).
struct SamplingParams {
  float temperature = 1.0f;         // [0, 2]; 0 = greedy
  float top_p = 1.0f;               // (0, 1]
  int top_k = -1;                   // >= 1, or -1 = off (a request's 0 is stored as -1)
  float min_p = 0.0f;               // [0, 1]; 0 = off
  float repetition_penalty = 1.0f;  // (0, 2], multiplicative (vLLM / HF); 1 = off
  float frequency_penalty = 0.0f;   // [-2, 2], additive (OpenAI)
  float presence_penalty = 0.0f;    // [-2, 2], additive (OpenAI)
  std::optional<int64_t> seed;
  std::map<int, float> logit_bias;  // token id -> bias in [-100, 100]
  bool logprobs = false;
  int top_logprobs = 0;               // [0, 20]; > 0 needs logprobs
  int n = 1;                          // only 1 is supported
  std::optional<int64_t> max_tokens;  // max_completion_tokens, else max_tokens; unset = no cap
  int64_t min_tokens = 0;             // extension (vLLM): stops and EOS are ignored before this
  std::vector<std::string> stop;      // non-empty strings, at most ParseLimits::max_stop
  std::vector<int> stop_token_ids;    // extension (vLLM)
  bool ignore_eos = false;            // extension (vLLM)
};

enum class ToolChoiceKind { kAuto, kNone, kRequired, kFunction };

struct ToolChoice {
  ToolChoiceKind kind = ToolChoiceKind::kAuto;
  std::string function_name;  // kFunction only; always names one of the request's tools
};

enum class ResponseFormatKind { kText, kJsonObject, kJsonSchema, kRegex, kGrammar };

struct ResponseFormat {
  ResponseFormatKind kind = ResponseFormatKind::kText;
  std::string name;         // json_schema.name, when given
  bool strict = false;      // json_schema.strict
  std::string schema_json;  // kJsonSchema: json_schema.schema, as (minified) JSON text
  std::string pattern;      // kRegex: the regex; kGrammar: the EBNF grammar source
};

struct StreamOptions {
  bool include_usage = false;  // send a trailing chunk with "choices": [] and the usage
};

struct ChatCompletionRequest {
  std::string model;  // "" when the client sent none
  std::vector<ChatMessage> messages;
  ChatOptions options;     // thinking, reasoning_effort, tools_json, response_format_json
  ToolChoice tool_choice;  // default: auto with tools, none without
  bool parallel_tool_calls = true;
  std::vector<std::string> tool_names;  // function names of `tools`, in order
  ResponseFormat response_format;       // parsed; options.response_format_json holds its text
  bool stream = false;
  StreamOptions stream_options;
  SamplingParams sampling;
  std::string user;  // the OpenAI `user` field, for logs
};

/// Parses and validates a chat-completions request body. Unknown fields are ignored; JSON null
/// counts as absent for every optional field. Wrong types, out-of-range values and unsupported
/// features (image parts, n > 1) are InvalidArgument whose message starts with the field's path.
Result<ChatCompletionRequest> ParseChatCompletionRequest(std::string_view json_body,
                                                         const ParseLimits& limits = {});

// ---------------------------------------------------------------------------------------------
// Response side.

enum class FinishReason {
  kNone,           // not finished (streaming chunks before the last): null
  kStop,           // EOS or a stop string / token
  kLength,         // max_tokens or the context length
  kToolCalls,      // the turn ended with tool calls
  kContentFilter,  // cut by a policy (e.g. a grammar that cannot continue)
  kError,          // the engine failed this request mid-way ("error")
  kAbort,          // cancelled by the server, e.g. during a drain ("abort", as vLLM)
};

/// The wire name ("stop", "length", ...); nullptr for kNone.
const char* FinishReasonName(FinishReason reason);

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;            // total_tokens is the sum of the two
  std::optional<int64_t> cached_tokens;     // prompt_tokens_details.cached_tokens
  std::optional<int64_t> reasoning_tokens;  // completion_tokens_details.reasoning_tokens
};

struct TopLogprob {
  std::string token;  // the token's raw bytes (may be a partial UTF-8 sequence)
  float logprob = 0;
};

struct TokenLogprob {
  std::string token;  // raw bytes; written as text (invalid UTF-8 -> U+FFFD) and as "bytes"
  float logprob = 0;  // -inf is written as -9999.0, as OpenAI does
  std::vector<TopLogprob> top_logprobs;
};

/// A whole non-streaming answer.
struct ChatCompletion {
  std::string id;       // "chatcmpl-..."
  int64_t created = 0;  // unix seconds
  std::string model;
  std::string system_fingerprint;    // omitted when empty
  std::string content;               // null in the JSON when empty and tool_calls is not
  std::string reasoning_content;     // omitted when empty
  std::vector<ToolCall> tool_calls;  // an empty id becomes MakeToolCallId(id, index)
  FinishReason finish_reason = FinishReason::kStop;
  Usage usage;
  std::optional<std::vector<TokenLogprob>> logprobs;  // null in the JSON when unset
};

/// One piece of a streamed tool call. The first piece of a call carries its name (and id), the
/// later ones only argument text; `index` says which call of the turn it belongs to.
struct ToolCallDelta {
  int index = 0;
  std::string id;         // first piece: MakeToolCallId(chunk id, index) when empty
  std::string name;       // non-empty exactly in a call's first piece
  std::string arguments;  // the next fragment of the arguments' JSON text
};

/// One `chat.completion.chunk`.
struct CompletionChunk {
  std::string id;  // the same for every chunk of a completion
  int64_t created = 0;
  std::string model;
  std::string system_fingerprint;  // omitted when empty
  bool role = false;               // delta.role = "assistant" (the first chunk)
  std::string content;             // delta.content, omitted when empty (except with role)
  std::string reasoning_content;   // delta.reasoning_content, omitted when empty
  std::vector<ToolCallDelta> tool_calls;
  FinishReason finish_reason = FinishReason::kNone;
  std::optional<Usage> usage;  // written when set (with a choice, DeepSeek-style, or alone)
  bool usage_only = false;     // "choices": [] — OpenAI's stream_options.include_usage trailer
  std::optional<std::vector<TokenLogprob>> logprobs;
};

/// The non-streaming `chat.completion` object.
std::string ChatCompletionResponseJson(const ChatCompletion& completion);

/// One `chat.completion.chunk` object (no SSE framing; see SseEvent).
std::string ChatCompletionChunkJson(const CompletionChunk& chunk);

/// `{"error": {"message", "type", "param", "code"}}` for a failed request. `param` is the JSON
/// path that starts the message, when there is one; `code` is ErrorCodeName(status.code()).
std::string ErrorResponseJson(const Status& status);

/// "data: <json>\n\n", and the stream's terminator.
std::string SseEvent(std::string_view json);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

/// "call_" + 24 hex digits: a hash of request_id, then the counter. Deterministic, and distinct
/// for distinct counters of one request.
std::string MakeToolCallId(std::string_view request_id, uint64_t counter);

// ---------------------------------------------------------------------------------------------
// JSON text output. Strings go through AppendJsonString (engine/common/json_writer.h): quotes,
// backslash and control characters escaped, invalid UTF-8 replaced by U+FFFD per maximal
// ill-formed subpart, so model output cut inside a character never yields invalid JSON.

/// Appends the shortest decimal text that parses back to exactly `v` (std::to_chars); non-finite
/// values, which JSON cannot hold, are written as null.
void AppendJsonNumber(std::string* out, double v);
void AppendJsonNumber(std::string* out, float v);
void AppendJsonNumber(std::string* out, int64_t v);

}  // namespace deepinfer

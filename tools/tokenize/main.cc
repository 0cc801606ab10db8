// deepinfer-tokenize: encode, decode and chat-render with the DeepSeek tokenizer.
#include <simdjson.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "engine/common/json_writer.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/openai.h"
#include "engine/tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

constexpr const char* kUsage = R"(usage: deepinfer-tokenize COMMAND [options]

commands:
  encode --tokenizer DIR --jsonl FILE [--safe]
      One JSON string per input line -> one JSON array of token ids per output line. Special-token
      strings in the text become their ids unless --safe (then they are plain text).
  decode --tokenizer DIR --jsonl FILE [--skip-special]
      One JSON array of ids per input line -> one JSON string per output line.
  chat --tokenizer DIR --messages FILE.json [--thinking] [--reasoning-effort high|max]
       [--tools FILE.json]
      Render a conversation with the V4 chat template; prints the prompt, then a line with its
      ids. FILE.json is an array of OpenAI-style messages or a chat-completions request body.
FILE may be - for standard input. DIR holds tokenizer.json.
)";

using Args = std::map<std::string, std::string>;

Result<Args> ParseArgs(int argc, char** argv, const std::vector<std::string>& with_value,
                       const std::vector<std::string>& bare) {
  Args a;
  for (int i = 2; i < argc; ++i) {
    const std::string k = argv[i];
    if (std::find(with_value.begin(), with_value.end(), k) != with_value.end()) {
      if (i + 1 >= argc) return InvalidArgument(k + " needs a value");
      a[k] = argv[++i];
    } else if (std::find(bare.begin(), bare.end(), k) != bare.end()) {
      a[k] = "1";
    } else {
      return InvalidArgument("unknown option '" + k + "'");
    }
  }
  return a;
}

Result<std::string> ReadAll(const std::string& path) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path + ": cannot read");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Calls fn(line_number, line) for every non-empty line.
template <typename Fn>
Status ForEachLine(const std::string& text, Fn fn) {
  size_t start = 0, line_no = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    ++line_no;
    std::string_view line(text.data() + start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.empty()) DI_RETURN_IF_ERROR(fn(line_no, line));
    start = end + 1;
  }
  return Status::Ok();
}

Status Encode(const Args& a, const Tokenizer& tok) {
  if (!a.count("--jsonl")) return InvalidArgument("encode needs --jsonl FILE");
  DI_ASSIGN_OR_RETURN(std::string text, ReadAll(a.at("--jsonl")));
  const SpecialTokens mode =
      a.count("--safe") ? SpecialTokens::kPlainText : SpecialTokens::kRecognize;
  simdjson::dom::parser parser;
  std::string out;
  DI_RETURN_IF_ERROR(ForEachLine(text, [&](size_t n, std::string_view line) -> Status {
    std::string_view s;
    if (parser.parse(line.data(), line.size()).get(s)) {
      return InvalidArgument("line " + std::to_string(n) + ": not a JSON string");
    }
    out += '[';
    bool first = true;
    for (int32_t id : tok.Encode(s, mode)) {
      if (!first) out += ',';
      out += std::to_string(id);
      first = false;
    }
    out += "]\n";
    return Status::Ok();
  }));
  std::fwrite(out.data(), 1, out.size(), stdout);
  return Status::Ok();
}

Status Decode(const Args& a, const Tokenizer& tok) {
  if (!a.count("--jsonl")) return InvalidArgument("decode needs --jsonl FILE");
  DI_ASSIGN_OR_RETURN(std::string text, ReadAll(a.at("--jsonl")));
  simdjson::dom::parser parser;
  std::string out;
  DI_RETURN_IF_ERROR(ForEachLine(text, [&](size_t n, std::string_view line) -> Status {
    simdjson::dom::array arr;
    if (parser.parse(line.data(), line.size()).get(arr)) {
      return InvalidArgument("line " + std::to_string(n) + ": not a JSON array");
    }
    std::vector<int32_t> ids;
    for (auto v : arr) {
      int64_t id;
      if (v.get(id) || id < 0 || id > INT32_MAX) {
        return InvalidArgument("line " + std::to_string(n) + ": ids must be non-negative integers");
      }
      ids.push_back(static_cast<int32_t>(id));
    }
    auto s = tok.Decode(ids, a.count("--skip-special") > 0);
    if (!s.ok()) return InvalidArgument("line " + std::to_string(n) + ": " + s.status().message());
    AppendJsonString(&out, *s);
    out += '\n';
    return Status::Ok();
  }));
  std::fwrite(out.data(), 1, out.size(), stdout);
  return Status::Ok();
}

Status Chat(const Args& a, const Tokenizer& tok) {
  if (!a.count("--messages")) return InvalidArgument("chat needs --messages FILE.json");
  DI_ASSIGN_OR_RETURN(std::string body, ReadAll(a.at("--messages")));
  size_t first = body.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && body[first] == '[') body = "{\"messages\": " + body + "}";
  DI_ASSIGN_OR_RETURN(ChatCompletionRequest req, ParseChatCompletionRequest(body));
  if (a.count("--thinking")) req.options.thinking = true;
  if (a.count("--reasoning-effort")) req.options.reasoning_effort = a.at("--reasoning-effort");
  if (a.count("--tools")) {
    DI_ASSIGN_OR_RETURN(std::string tools, ReadAll(a.at("--tools")));
    DI_ASSIGN_OR_RETURN(ChatCompletionRequest t,
                        ParseChatCompletionRequest("{\"messages\": [], \"tools\": " + tools + "}"));
    req.options.tools_json = t.options.tools_json;
  }
  DI_ASSIGN_OR_RETURN(RenderedPrompt prompt, RenderV4Chat(req.messages, req.options));
  DI_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok.EncodePrompt(prompt));
  std::string out = prompt.text + "\n[";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  out += "]\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return Status::Ok();
}

int Main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  Result<Args> args = InvalidArgument("unknown command '" + cmd + "'");
  if (cmd == "encode") args = ParseArgs(argc, argv, {"--tokenizer", "--jsonl"}, {"--safe"});
  if (cmd == "decode") args = ParseArgs(argc, argv, {"--tokenizer", "--jsonl"}, {"--skip-special"});
  if (cmd == "chat") {
    args = ParseArgs(argc, argv, {"--tokenizer", "--messages", "--reasoning-effort", "--tools"},
                     {"--thinking"});
  }
  Status st = args.status();
  if (args.ok()) {
    if (!args->count("--tokenizer")) {
      st = InvalidArgument(cmd + " needs --tokenizer DIR");
    } else {
      auto tok = Tokenizer::LoadDir(args->at("--tokenizer"));
      if (!tok.ok())
        st = tok.status();
      else if (cmd == "encode")
        st = Encode(*args, **tok);
      else if (cmd == "decode")
        st = Decode(*args, **tok);
      else
        st = Chat(*args, **tok);
    }
  }
  if (!st.ok()) {
    std::fprintf(stderr, "deepinfer-tokenize %s: %s\n", cmd.c_str(), st.ToString().c_str());
    return st.code() == ErrorCode::kInvalidArgument ? 2 : 1;
  }
  return 0;
}

}  // namespace
}  // namespace deepinfer

int main(int argc, char** argv) { return deepinfer::Main(argc, argv); }

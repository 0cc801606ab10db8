#include "grammar/json_strings.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>

#include "grammar/regex.h"
#include "grammar/unicode.h"

namespace deepinfer::grammar {

namespace {

ByteSet Hex() {
  ByteSet s = ByteSet::Range('0', '9');
  s.Union(ByteSet::Range('a', 'f'));
  s.Union(ByteSet::Range('A', 'F'));
  return s;
}
ByteSet Bytes(std::string_view chars) {
  ByteSet s;
  for (char c : chars) s.Add(static_cast<uint8_t>(c));
  return s;
}
Symbol B(const ByteSet& s) { return Symbol::Bytes(s); }

// Days per month exactly; February 29 only in leap years (divisible by 4, centuries by 400).
const char* const kDate =
    "([0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|"
    "02-(0[1-9]|1[0-9]|2[0-8]))|"
    "([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26]|00)00)-02-29)";
// A leap second is valid only at 23:59:60 UTC; it is accepted only when written in UTC (an
// offset would move the local time away from 23:59), which is sound and rarely incomplete.
const char* const kTime =
    "(([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5]"
    "[0-9])|23:59:60(\\.[0-9]+)?([Zz]|[+-]00:00))";
const char* const kOctet = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";

// RFC 3986 IPv6address, the last 32 bits as two groups or as an IPv4 address.
std::string Ipv6Regex() {
  const std::string h = "[0-9a-fA-F]{1,4}";
  const std::string ls32 = "(" + h + ":" + h + "|" + kOctet + "(\\." + kOctet + "){3})";
  auto before = [&](int n) {  // [ *n( h16 ":" ) h16 ]
    return n < 0 ? std::string() : "((" + h + ":){0," + std::to_string(n) + "}" + h + ")?";
  };
  return "(" + h + ":){6}" + ls32 + "|::(" + h + ":){5}" + ls32 + "|" + before(0) + "::(" + h +
         ":){4}" + ls32 + "|" + before(1) + "::(" + h + ":){3}" + ls32 + "|" + before(2) + "::(" +
         h + ":){2}" + ls32 + "|" + before(3) + "::" + h + ":" + ls32 + "|" + before(4) +
         "::" + ls32 + "|" + before(5) + "::" + h + "|" + before(6) + "::";
}

// RFC 3986 URI (an IPv4 host is a reg-name too).
std::string UriRegex() {
  const std::string pct = "%[0-9A-Fa-f]{2}";
  const std::string pchar = "([A-Za-z0-9._~!$&'()*+,;=:@-]|" + pct + ")";
  const std::string userinfo = "([A-Za-z0-9._~!$&'()*+,;=:-]|" + pct + ")*";
  const std::string reg_name = "([A-Za-z0-9._~!$&'()*+,;=-]|" + pct + ")*";
  const std::string ip_literal =
      "\\[(" + Ipv6Regex() + "|[Vv][0-9A-Fa-f]+\\.[A-Za-z0-9._~!$&'()*+,;=:-]+)\\]";
  const std::string authority =
      "(" + userinfo + "@)?(" + ip_literal + "|" + reg_name + ")(:[0-9]*)?";
  const std::string segments = "(/" + pchar + "*)*";
  const std::string hier = "(//" + authority + segments + "|/(" + pchar + "+" + segments + ")?|" +
                           pchar + "+" + segments + ")?";
  const std::string tail = "(\\?(" + pchar + "|[/?])*)?(#(" + pchar + "|[/?])*)?";
  return "[A-Za-z][A-Za-z0-9+.-]*:" + hier + tail;
}

}  // namespace

void JsonPieces::Ws(Sequence* seq) {
  if (!flexible_) return;
  if (!have_ws_) {
    ws_ = g_->Star(B(Bytes(" \t\n\r")));
    have_ws_ = true;
  }
  seq->push_back(ws_);
}

void JsonPieces::Punct(Sequence* seq, std::string_view p) {
  Ws(seq);
  for (const Symbol& s : Grammar::Literal(p)) seq->push_back(s);
  Ws(seq);
}

Symbol JsonPieces::Char(bool canonical) {
  const CodeSet all = Normalize({{0, kMaxCodePoint}});
  if (canonical) {
    if (!have_canon_) char_canon_ = JsonCharClass(g_, all, true);
    have_canon_ = true;
    return char_canon_;
  }
  if (have_char_) return char_;
  // An unescaped character, or a backslash and: a short escape, \u of a non-surrogate, or a
  // surrogate pair \uD8xx\uDCxx (lone surrogates are rejected).
  const ByteSet hex = Hex();
  const CodeSet plain = Subtract(all, Normalize({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}));
  Sequence non_surrogate_a = {B(ByteSet::Single('u')), B(Bytes("0123456789abceABCEfF")), B(hex),
                              B(hex), B(hex)};
  Sequence non_surrogate_b = {B(ByteSet::Single('u')), B(Bytes("dD")), B(ByteSet::Range('0', '7')),
                              B(hex), B(hex)};
  Sequence pair = {B(ByteSet::Single('u')), B(Bytes("dD")), B(Bytes("89abAB")), B(hex), B(hex)};
  for (const Symbol& s : Grammar::Literal("\\u")) pair.push_back(s);
  pair.insert(pair.end(), {B(Bytes("dD")), B(Bytes("cdefCDEF")), B(hex), B(hex)});
  const Symbol escape =
      g_->Choice({{B(Bytes("\"\\/bfnrt"))}, non_surrogate_a, non_surrogate_b, pair}, "escape");
  char_ = g_->Choice({{Utf8Class(g_, plain)}, {B(ByteSet::Single('\\')), escape}}, "char");
  have_char_ = true;
  return char_;
}

Symbol JsonPieces::Quoted(Symbol content) {
  return g_->Group({B(ByteSet::Single('"')), content, B(ByteSet::Single('"'))}, "string");
}

Symbol JsonPieces::String(int min, int max) {
  if (min == 0 && max < 0) {
    if (!have_string_) string_ = Quoted(g_->Star(Char()));
    have_string_ = true;
    return string_;
  }
  return Quoted(g_->Repeat(Char(), min, max));
}

Symbol JsonPieces::Integer(int sign) {
  const Symbol digits = g_->Star(B(ByteSet::Range('0', '9')));
  const Symbol positive = g_->Group({B(ByteSet::Range('1', '9')), digits}, "positive");
  const Symbol zero = B(ByteSet::Single('0'));
  const Symbol minus = B(ByteSet::Single('-'));
  switch (sign) {
    case 1:
      return g_->Choice({{zero}, {positive}}, "non_negative");
    case 2:
      return positive;
    case -1:
      return g_->Choice({{zero}, {minus, positive}}, "non_positive");
    case -2:
      return g_->Group({minus, positive}, "negative");
    default:
      return g_->Choice({{zero}, {positive}, {minus, zero}, {minus, positive}}, "integer");
  }
}

// Decimal strings of a's length between a and b (same length, a <= b).
Symbol JsonPieces::SameLength(const std::string& a, const std::string& b) {
  const auto digit = [](char lo, char hi) {
    return B(ByteSet::Range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)));
  };
  if (a.size() == 1) return digit(a[0], b[0]);
  const std::string ta = a.substr(1), tb = b.substr(1);
  if (a[0] == b[0]) return g_->Group({digit(a[0], a[0]), SameLength(ta, tb)}, "digits");
  std::vector<Sequence> alts;
  alts.push_back({digit(a[0], a[0]), SameLength(ta, std::string(ta.size(), '9'))});
  if (b[0] - a[0] >= 2) {
    Sequence mid = {digit(static_cast<char>(a[0] + 1), static_cast<char>(b[0] - 1))};
    for (size_t i = 0; i < ta.size(); ++i) mid.push_back(digit('0', '9'));
    alts.push_back(std::move(mid));
  }
  alts.push_back({digit(b[0], b[0]), SameLength(std::string(tb.size(), '0'), tb)});
  return g_->Choice(std::move(alts), "digits");
}

Symbol JsonPieces::NonNegativeRange(int64_t lo, bool has_hi, int64_t hi) {
  const std::string slo = std::to_string(lo), shi = std::to_string(hi);
  const size_t last = has_hi ? shi.size() : slo.size();
  std::vector<Sequence> alts;
  uint64_t pow = 1;  // 10^(d-1); d <= 19, so 10^19 still fits
  for (size_t d = 1; d <= last; ++d, pow *= 10) {
    if (d < slo.size()) continue;
    const int64_t top = d == 19 ? INT64_MAX : static_cast<int64_t>(pow * 10 - 1);
    const int64_t a = std::max(lo, d == 1 ? int64_t{0} : static_cast<int64_t>(pow));
    const int64_t b = has_hi ? std::min(hi, top) : top;
    if (a <= b) alts.push_back({SameLength(std::to_string(a), std::to_string(b))});
  }
  if (!has_hi) {  // every longer number
    alts.push_back({B(ByteSet::Range('1', '9')),
                    g_->Repeat(B(ByteSet::Range('0', '9')), static_cast<int>(slo.size()), -1)});
  }
  return alts.empty() ? g_->Nothing() : g_->Choice(std::move(alts), "range");
}

Symbol JsonPieces::IntegerRange(bool has_lo, int64_t lo, bool has_hi, int64_t hi) {
  std::vector<Sequence> alts;
  if (!has_lo || lo < 0) {  // negative values: "-" and a magnitude in [max(1, -hi), -lo]
    const int64_t mag_lo = has_hi && hi < -1 ? -hi : 1;
    if (!has_lo || -lo >= mag_lo) {
      alts.push_back({B(ByteSet::Single('-')), NonNegativeRange(mag_lo, has_lo, has_lo ? -lo : 0)});
    }
  }
  if (!has_hi || hi >= 0)
    alts.push_back({NonNegativeRange(has_lo ? std::max<int64_t>(lo, 0) : 0, has_hi, hi)});
  return alts.empty() ? g_->Nothing() : g_->Choice(std::move(alts), "integer_range");
}

Symbol JsonPieces::Number(bool non_negative) {
  const Symbol digits1 = g_->Plus(B(ByteSet::Range('0', '9')));
  const Symbol frac = g_->Optional(g_->Group({B(ByteSet::Single('.')), digits1}, "frac"));
  const Symbol exp =
      g_->Optional(g_->Group({B(Bytes("eE")), g_->Optional(B(Bytes("+-"))), digits1}, "exp"));
  return g_->Group({Integer(non_negative ? 1 : 0), frac, exp}, "number");
}

Symbol JsonPieces::Value() {
  if (have_value_) return value_;
  have_value_ = true;
  const int32_t value = g_->AddRule("value");
  value_ = Symbol::Rule(value);
  // object
  Sequence member = {String()};
  Punct(&member, ":");
  member.push_back(value_);
  const Symbol m = g_->Group(member, "member");
  Sequence more;
  Punct(&more, ",");
  more.push_back(m);
  Sequence empty_obj = Grammar::Literal("{"), obj = Grammar::Literal("{");
  Ws(&empty_obj);
  Ws(&obj);
  empty_obj.push_back(B(ByteSet::Single('}')));
  obj.insert(obj.end(), {m, g_->Star(g_->Group(more, "members"))});
  Ws(&obj);
  obj.push_back(B(ByteSet::Single('}')));
  object_ = g_->Choice({empty_obj, obj}, "object");
  // array
  Sequence more_items;
  Punct(&more_items, ",");
  more_items.push_back(value_);
  Sequence empty_arr = Grammar::Literal("["), arr = Grammar::Literal("[");
  Ws(&empty_arr);
  Ws(&arr);
  empty_arr.push_back(B(ByteSet::Single(']')));
  arr.insert(arr.end(), {value_, g_->Star(g_->Group(more_items, "items"))});
  Ws(&arr);
  arr.push_back(B(ByteSet::Single(']')));
  array_ = g_->Choice({empty_arr, arr}, "array");
  for (Sequence alt :
       {Sequence{object_}, Sequence{array_}, Sequence{String()}, Sequence{Number()},
        Grammar::Literal("true"), Grammar::Literal("false"), Grammar::Literal("null")}) {
    g_->AddAlternative(value, std::move(alt));
  }
  return value_;
}

Symbol JsonPieces::AnyObject() {
  Value();
  return object_;
}

Symbol JsonPieces::AnyArray() {
  Value();
  return array_;
}

Result<Symbol> JsonPieces::FormatContent(std::string_view format,
                                         std::vector<std::string>* warnings) {
  std::string re;
  if (format == "date") {
    re = kDate;
  } else if (format == "time") {
    re = kTime;
  } else if (format == "date-time") {
    re = std::string(kDate) + "[Tt]" + kTime;
  } else if (format == "uuid") {
    re = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";
  } else if (format == "ipv4") {
    re = std::string(kOctet) + "(\\." + kOctet + "){3}";
  } else if (format == "ipv6") {
    re = Ipv6Regex();
  } else if (format == "email") {
    // RFC 5321 Mailbox: dot-string or quoted-string, then a domain or an IPv4/IPv6 address
    // literal (general address literals with IANA tags are not accepted).
    re = "([A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*|"
         "\"([ !#-\\[\\]-~]|\\\\[ -~])*\")@"
         "([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*|"
         "\\[(" +
         std::string(kOctet) + "(\\." + kOctet + "){3}|[Ii][Pp][Vv]6:(" + Ipv6Regex() + "))\\])";
    warnings->push_back("format email: general address literals ([tag:...]) are not accepted");
  } else if (format == "uri") {
    re = UriRegex();
  } else {
    return InvalidArgument("json_schema: unsupported format '" + std::string(format) + "'");
  }
  RegexOptions opt;
  opt.json_string = true;
  return AddRegex(g_, re, opt);
}

Symbol JsonPieces::KeyContentExcept(const std::vector<std::string>& names) {
  const Symbol rest = g_->Star(Char(true));
  if (names.empty()) return rest;
  // A trie over the names' code points; leaving it (or stopping off a name) escapes exclusion.
  struct Node {
    std::map<uint32_t, int> kids;
    bool end = false;
  };
  std::vector<Node> trie(1);
  for (const std::string& name : names) {
    int node = 0;
    size_t i = 0;
    uint32_t cp;
    while (i < name.size() && DecodeUtf8(name, &i, &cp)) {
      auto it = trie[node].kids.find(cp);
      if (it == trie[node].kids.end()) {
        trie[node].kids[cp] = static_cast<int>(trie.size());
        trie.emplace_back();
        it = trie[node].kids.find(cp);
      }
      node = it->second;
    }
    trie[node].end = true;
  }
  std::vector<int32_t> rules(trie.size());
  for (size_t n = 0; n < trie.size(); ++n) rules[n] = g_->AddRule("key_except");
  for (size_t n = 0; n < trie.size(); ++n) {
    if (!trie[n].end) g_->AddAlternative(rules[n], {});
    CodeSet used;
    for (const auto& [cp, child] : trie[n].kids) {
      g_->AddAlternative(rules[n],
                         {JsonCharClass(g_, {{cp, cp}}, true), Symbol::Rule(rules[child])});
      used.push_back({cp, cp});
    }
    const CodeSet other = Subtract(Normalize({{0, kMaxCodePoint}}), Normalize(used));
    g_->AddAlternative(rules[n], {JsonCharClass(g_, other, true), rest});
  }
  return Symbol::Rule(rules[0]);
}

std::string JsonPieces::EncodeString(std::string_view utf8) {
  std::string out = "\"";
  static const char* kHex = "0123456789abcdef";
  for (char ch : utf8) {
    const uint8_t c = static_cast<uint8_t>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      const char* s = c == 8    ? "\\b"
                      : c == 12 ? "\\f"
                      : c == 10 ? "\\n"
                      : c == 13 ? "\\r"
                      : c == 9  ? "\\t"
                                : nullptr;
      out += s != nullptr ? std::string(s) : std::string("\\u00") + kHex[c >> 4] + kHex[c & 15];
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

}  // namespace deepinfer::grammar

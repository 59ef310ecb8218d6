// Reading a job config: TOML text + overrides → JobConfig, with every problem located.
#include "orchestrator/config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "orchestrator/config_schema.h"
#include "orchestrator/config_validate.h"

namespace lockstep::orchestrator {
namespace {

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t substitution = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitution});
    }
  }
  return row[b.size()];
}

// "; did you mean 'x'?" for the closest candidate within a few edits, else "".
std::string Suggestion(const std::string& name, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, name.size() / 3) + 1;
  for (const std::string& candidate : candidates) {
    size_t distance = EditDistance(name, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best.empty() ? "" : absl::StrCat("; did you mean '", best, "'?");
}

const char* TypeName(const toml::node& node) {
  // Indexed by toml::node_type: none, table, array, string, integer, floating_point, boolean,
  // date, time, date_time.
  static constexpr const char* kNames[] = {"nothing",    "a table",   "an array", "a string",
                                           "an integer", "a float",   "a boolean", "a date",
                                           "a time",     "a date-time"};
  const auto index = static_cast<size_t>(node.type());
  return index < std::size(kNames) ? kNames[index] : "nothing";
}

// Shared by the readers of one load: where keys came from, and the errors so far.
struct LoadContext {
  std::string source_name;
  std::map<std::string, std::string> override_labels;  // "section.key" -> "--set section.key=v"
  std::map<std::string, std::string> locations;        // "section.key" -> "FILE:LINE"
  std::vector<std::string> errors;

  std::string Where(const std::string& dotted_key, const toml::node* node) const {
    auto label = override_labels.find(dotted_key);
    if (label != override_labels.end()) return label->second;
    if (node != nullptr && node->source().begin.line > 0) {
      return absl::StrCat(source_name, ":", static_cast<uint64_t>(node->source().begin.line));
    }
    return source_name;
  }
};

// Reads the keys of one section into typed fields, recording type errors and unknown keys.
class SectionReader {
 public:
  // `table` may be null (section absent: every field keeps its default). `schema` names the
  // KnownKeys() entry; `section` is how messages name it ("rewards.servers[1]").
  SectionReader(const toml::table* table, std::string schema, std::string section,
                LoadContext* context)
      : table_(table),
        schema_(std::move(schema)),
        section_(std::move(section)),
        context_(context) {}

  const toml::node* Node(const std::string& key) {
    seen_.insert(key);
    if (table_ == nullptr) return nullptr;
    const toml::node* node = table_->get(key);
    if (node != nullptr) context_->locations[Dotted(key)] = context_->Where(Dotted(key), node);
    return node;
  }

  void Read(const std::string& key, std::string* out) {
    const toml::node* node = Node(key);
    if (node == nullptr) return;
    if (!node->is_string()) return TypeError(key, *node, "a string");
    *out = node->as_string()->get();
  }

  void Read(const std::string& key, int64_t* out) {
    const toml::node* node = Node(key);
    if (node == nullptr) return;
    if (!node->is_integer()) return TypeError(key, *node, "an integer");
    *out = node->as_integer()->get();
  }

  void Read(const std::string& key, double* out) {
    const toml::node* node = Node(key);
    if (node == nullptr) return;
    if (node->is_integer()) {
      *out = static_cast<double>(node->as_integer()->get());
    } else if (node->is_floating_point()) {
      *out = node->as_floating_point()->get();
    } else {
      TypeError(key, *node, "a number");
    }
  }

  void Read(const std::string& key, bool* out) {
    const toml::node* node = Node(key);
    if (node == nullptr) return;
    if (!node->is_boolean()) return TypeError(key, *node, "a boolean");
    *out = node->as_boolean()->get();
  }

  void Read(const std::string& key, std::vector<std::string>* out) {
    const toml::node* node = Node(key);
    if (node == nullptr) return;
    const toml::array* array = node->as_array();
    if (array == nullptr) return TypeError(key, *node, "an array of strings");
    std::vector<std::string> values;
    for (const toml::node& element : *array) {
      if (!element.is_string()) return TypeError(key, element, "an array of strings");
      values.push_back(element.as_string()->get());
    }
    *out = std::move(values);
  }

  void Read(const std::string& key, std::vector<double>* out) {
    const toml::node* node = Node(key);
    if (node == nullptr) return;
    const toml::array* array = node->as_array();
    if (array == nullptr) return TypeError(key, *node, "an array of numbers");
    std::vector<double> values;
    for (const toml::node& element : *array) {
      if (element.is_integer()) {
        values.push_back(static_cast<double>(element.as_integer()->get()));
      } else if (element.is_floating_point()) {
        values.push_back(element.as_floating_point()->get());
      } else {
        return TypeError(key, element, "an array of numbers");
      }
    }
    *out = std::move(values);
  }

  // Free-form options (a table), converted to JSON.
  void Read(const std::string& key, nlohmann::json* out) {
    const toml::node* node = Node(key);
    if (node == nullptr) return;
    if (!node->is_table()) return TypeError(key, *node, "a table");
    *out = ToJson(*node);
  }

  void Read(const KeyField& key) {
    std::visit([&](auto* out) { Read(key.name, out); }, key.field);
  }

  // Reports keys of the table that no reader asked for.
  void CheckUnknownKeys() {
    if (table_ == nullptr) return;
    const std::vector<std::string>& known = KnownKeys().at(schema_);
    for (const auto& [key, node] : *table_) {
      std::string name(key.str());
      if (seen_.count(name) > 0) continue;
      context_->errors.push_back(absl::StrCat(context_->Where(Dotted(name), &node), ": [", section_,
                                              "] unknown key '", name, "'",
                                              Suggestion(name, known)));
    }
  }

  const std::string& section() const { return section_; }

 private:
  std::string Dotted(const std::string& key) const { return absl::StrCat(section_, ".", key); }

  void TypeError(const std::string& key, const toml::node& node, const char* expected) {
    context_->errors.push_back(absl::StrCat(context_->Where(Dotted(key), &node), ": [", section_,
                                            "] ", key, ": expected ", expected, ", got ",
                                            TypeName(node)));
  }

  static nlohmann::json ToJson(const toml::node& node) {
    switch (node.type()) {
      case toml::node_type::table: {
        nlohmann::json object = nlohmann::json::object();
        for (const auto& [key, value] : *node.as_table())
          object[std::string(key.str())] = ToJson(value);
        return object;
      }
      case toml::node_type::array: {
        nlohmann::json array = nlohmann::json::array();
        for (const toml::node& value : *node.as_array()) array.push_back(ToJson(value));
        return array;
      }
      case toml::node_type::string:
        return node.as_string()->get();
      case toml::node_type::integer:
        return node.as_integer()->get();
      case toml::node_type::floating_point:
        return node.as_floating_point()->get();
      case toml::node_type::boolean:
        return node.as_boolean()->get();
      default: {  // dates and times: their TOML text
        std::ostringstream text;
        node.visit([&text](const auto& value) { text << value; });
        return text.str();
      }
    }
  }

  const toml::table* table_;
  std::string schema_;
  std::string section_;
  LoadContext* context_;
  std::set<std::string> seen_;
};

const toml::table* SectionTable(const toml::table& root, const std::string& name,
                                LoadContext* context) {
  const toml::node* node = root.get(name);
  if (node == nullptr) return nullptr;
  if (!node->is_table()) {
    context->errors.push_back(absl::StrCat(context->Where(name, node), ": [", name,
                                           "] must be a table, got ", TypeName(*node)));
    return nullptr;
  }
  return node->as_table();
}

// [[rewards.servers]]: an array of tables, each read against RewardServerFields.
void ReadRewardServers(SectionReader& rewards, LoadContext* context,
                       std::vector<RewardServerConfig>* out) {
  const toml::node* servers = rewards.Node("servers");
  if (servers == nullptr) return;
  const toml::array* array = servers->as_array();
  if (array == nullptr || (!array->empty() && !array->is_array_of_tables())) {
    context->errors.push_back(absl::StrCat(
        context->Where("rewards.servers", servers),
        ": [rewards] servers: expected an array of tables ([[rewards.servers]]), got ",
        TypeName(*servers)));
    return;
  }
  for (size_t i = 0; i < array->size(); ++i) {
    RewardServerConfig server;
    server.name = absl::StrCat("server", i);
    SectionReader s(array->get(i)->as_table(), "rewards.servers",
                    absl::StrCat("rewards.servers[", i, "]"), context);
    for (const KeyField& key : RewardServerFields(server)) s.Read(key);
    s.CheckUnknownKeys();
    out->push_back(std::move(server));
  }
}

void ReadSections(const toml::table& root, LoadContext* context, JobConfig* config) {
  for (const SectionFields& section : JobSections(*config)) {
    const std::string name = section.name;
    SectionReader r(SectionTable(root, name, context), name, name, context);
    for (const KeyField& key : section.keys) r.Read(key);
    // Addresses replace started generators: their number is the count unless one is stated.
    if (name == "generator" && r.Node("count") == nullptr && !config->generator.addresses.empty()) {
      config->generator.count = static_cast<int64_t>(config->generator.addresses.size());
    }
    if (name == "rewards") ReadRewardServers(r, context, &config->rewards.servers);
    r.CheckUnknownKeys();
  }

  // Top-level names that are not sections.
  std::vector<std::string> sections;
  for (const auto& [name, keys] : KnownKeys()) {
    if (name.find('.') == std::string::npos) sections.push_back(name);
  }
  for (const auto& [key, node] : root) {
    std::string name(key.str());
    if (KnownKeys().count(name) > 0 && name.find('.') == std::string::npos) continue;
    std::string hint = Suggestion(name, sections);
    if (hint.empty()) {
      for (const std::string& section : sections) {
        const std::vector<std::string>& keys = KnownKeys().at(section);
        if (std::find(keys.begin(), keys.end(), name) != keys.end()) {
          hint = absl::StrCat("; did you mean '", name, "' in [", section, "]?");
          break;
        }
      }
    }
    context->errors.push_back(
        absl::StrCat(context->Where(name, &node), ": unknown section '", name, "'", hint));
  }
}

std::string ParseErrorText(const toml::parse_error& error, const std::string& source_name) {
  return absl::StrCat(source_name, ":", static_cast<uint64_t>(error.source().begin.line),
                      ": TOML syntax error: ", std::string(error.description()));
}

// Applies "a.b.c=value" to `root`, creating tables on the way.
absl::Status ApplyOverride(const std::string& override_text, toml::table* root,
                           LoadContext* context) {
  const std::string label = absl::StrCat("--set ", override_text);
  size_t equals = override_text.find('=');
  if (equals == std::string::npos || equals == 0) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": expected section.key=value"));
  }
  std::string dotted = override_text.substr(0, equals);
  std::string value_text = override_text.substr(equals + 1);
  std::vector<std::string> path;
  for (size_t start = 0;;) {
    size_t dot = dotted.find('.', start);
    path.push_back(dotted.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (path.size() < 2 ||
      std::any_of(path.begin(), path.end(), [](const std::string& part) { return part.empty(); })) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": expected section.key=value (e.g. job.steps=20)"));
  }

  // The value as TOML; a bare word that is not TOML (job.name=demo) is a string.
  toml::table parsed;
  try {
    parsed = toml::parse(absl::StrCat("value = ", value_text), label);
  } catch (const toml::parse_error&) {
    toml::table quoted;
    quoted.insert("value", value_text);
    parsed = std::move(quoted);
  }

  toml::table* table = root;
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    toml::node* next = table->get(path[i]);
    if (next == nullptr) {
      table->insert(path[i], toml::table{});
      next = table->get(path[i]);
    }
    if (!next->is_table()) {
      return absl::InvalidArgumentError(absl::StrCat(label, ": '", path[i], "' is not a section"));
    }
    table = next->as_table();
  }
  table->insert_or_assign(path.back(), *parsed.get("value"));
  context->override_labels[dotted] = label;
  return absl::OkStatus();
}

absl::Status JoinedErrors(const std::vector<std::string>& errors) {
  if (errors.size() == 1) return absl::InvalidArgumentError(errors[0]);
  return absl::InvalidArgumentError(
      absl::StrCat(errors.size(), " config errors:\n  ", absl::StrJoin(errors, "\n  ")));
}

}  // namespace

absl::StatusOr<JobConfig> ParseJobConfig(const std::string& toml_text,
                                         const std::string& source_name,
                                         const std::vector<std::string>& overrides) {
  LoadContext context;
  context.source_name = source_name;
  toml::table root;
  try {
    root = toml::parse(toml_text, source_name);
  } catch (const toml::parse_error& error) {
    return absl::InvalidArgumentError(ParseErrorText(error, source_name));
  }
  for (const std::string& override_text : overrides) {
    absl::Status status = ApplyOverride(override_text, &root, &context);
    if (!status.ok()) return status;
  }

  JobConfig config;
  config.source = source_name;
  ReadSections(root, &context, &config);
  if (!context.errors.empty()) return JoinedErrors(context.errors);
  for (const auto& [key, location] : context.locations) config.given_keys.insert(key);

  std::vector<std::string> problems = CheckJobConfig(config, [&](const std::string& key) {
    auto location = context.locations.find(key);
    return location != context.locations.end() ? location->second : source_name;
  });
  if (!problems.empty()) return JoinedErrors(problems);
  return config;
}

absl::StatusOr<JobConfig> LoadJobConfig(const std::string& path,
                                        const std::vector<std::string>& overrides) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("config file not found: ", path));
  std::stringstream text;
  text << file.rdbuf();
  return ParseJobConfig(text.str(), path, overrides);
}

absl::Status ValidateJobConfig(const JobConfig& config) {
  const std::string source = config.source.empty() ? "<config>" : config.source;
  std::vector<std::string> problems =
      CheckJobConfig(config, [&](const std::string&) { return source; });
  if (problems.empty()) return absl::OkStatus();
  return JoinedErrors(problems);
}

}  // namespace lockstep::orchestrator

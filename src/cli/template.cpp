// `ditto template`: the prompt a model's chat template makes of a conversation, as the model
// sees it (what `ditto generate -p` and `ditto chat` encode).
#include <cstdio>

#include <nlohmann/json.hpp>

#include "chat/chat_format.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "ditto/error.h"
#include "ditto/load.h"
#include "runtime/token_ids.h"
#include "tensor/limits.h"

namespace ditto::cli {

namespace {

struct TemplateOptions {
  std::string model;
  std::string messages;
  std::string tools;
  std::vector<std::string> vars;
  std::string chat_template;
  bool no_generation_prompt = false;
};

nlohmann::ordered_json read_json_file(const std::string& path, const char* what) {
  return parse_json<nlohmann::ordered_json>(read_text(path), "'" + path + "' (" + what + ")");
}

void run_template(const TemplateOptions& o) {
  LoadOptions load;
  load.weights = false;
  const std::string path = model_path(o.model);
  const LoadedModel loaded = load_model(path, load);
  const auto messages = read_json_file(o.messages, "the messages");
  if (!messages.is_array()) throw Error("'" + o.messages + "' must hold a JSON array of messages");
  const auto tools = o.tools.empty() ? nlohmann::ordered_json() : read_json_file(o.tools, "the tools");
  const ChatFormat format(loaded, o.chat_template.empty() ? "" : read_text(o.chat_template));
  const std::string prompt = format.render(messages, tools, !o.no_generation_prompt, template_variables(o.vars));
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
}

}  // namespace

nlohmann::ordered_json template_variables(const std::vector<std::string>& assignments) {
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  for (const std::string& assignment : assignments) {
    const size_t equals = assignment.find('=');
    if (equals == 0 || equals == std::string::npos) throw Error("--var '" + assignment + "' is not NAME=VALUE");
    const std::string name = assignment.substr(0, equals), value = assignment.substr(equals + 1);
    // JSON if it is (false, 3, "text", [1, 2]), else the text itself.
    vars[name] = nlohmann::ordered_json::accept(value) ? parse_json<nlohmann::ordered_json>(value, "--var " + name)
                                                       : nlohmann::ordered_json(value);
  }
  return vars;
}

void add_chat_template_options(CLI::App* command, std::string& chat_template, std::vector<std::string>& vars) {
  command->add_option("--chat-template", chat_template, "A chat template file (Jinja) to use instead of the model's");
  command->add_option("--var", vars,
                      "A template variable, NAME=VALUE (repeatable); VALUE is JSON if it parses, else text, e.g. "
                      "--var enable_thinking=false");
}

void register_template(CLI::App& app) {
  auto o = std::make_shared<TemplateOptions>();
  CLI::App* cmd = app.add_subcommand("template", "Print the prompt the model's chat template makes of a conversation");
  add_model_option(cmd, o->model);
  cmd->add_option("--messages", o->messages,
                  "A JSON file holding the messages: [{\"role\": \"user\", \"content\": \"...\"}, ...]")
      ->required();
  cmd->add_option("--tools", o->tools, "A JSON file holding the tools (OpenAI's function schemas)");
  add_chat_template_options(cmd, o->chat_template, o->vars);
  cmd->add_flag("--no-generation-prompt", o->no_generation_prompt, "Do not open the assistant's turn at the end");
  cmd->callback([o] { run_template(*o); });
}

}  // namespace ditto::cli

// Config loading: typed reads, defaults recorded in the resolved config, overrides, and errors
// that carry file, line, column and key path, with suggestions for unknown keys.

#include <glob.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "support/expect_error.h"

#include "eddy/core/error.h"
#include "eddy/core/suggest.h"
#include "eddy/io/config.h"

namespace eddy::io {
namespace {

const char* kProblem = R"(train:
  adam:
    steps: 500
    lr: 1.0e-3
model:
  width: 20
  activation: tanh
fields: {u: {}, v: {}}
points: [1, 2.5, 3]
)";


// Reads the sample problem the way a solver would.
void read_problem(Config& config) {
  ConfigNode root = config.root();
  ConfigNode adam = root.section("train").section("adam");
  adam.integer("steps", 100);
  adam.number("lr", 1e-3);
  ConfigNode model = root.section("model");
  model.integer("width", 50);
  model.choice("activation", {"tanh", "sin"}, "tanh");
  if (auto fields = root.find("fields")) fields->keys();
  if (auto points = root.find("points")) points->as_numbers();
}

TEST(Config, TypedReadsAndDefaultsInTheResolvedConfig) {
  auto config = Config::parse(kProblem, "problem.yaml");
  ConfigNode root = config->root();
  EXPECT_EQ(root.at("train").at("adam").integer("steps"), 500);
  EXPECT_DOUBLE_EQ(root.at("train").at("adam").number("lr"), 1e-3);
  EXPECT_EQ(root.section("model").integer("depth", 4), 4);
  EXPECT_EQ(root.section("output").string("dir", "runs/x"), "runs/x");
  EXPECT_EQ(root.at("fields").keys(), (std::vector<std::string>{"u", "v"}));
  EXPECT_EQ(root.at("points").as_numbers(), (std::vector<double>{1, 2.5, 3}));
  const std::string resolved = config->resolved();
  EXPECT_NE(resolved.find("depth: 4"), std::string::npos);
  EXPECT_NE(resolved.find("dir: runs/x"), std::string::npos);
  EXPECT_EQ(config->hash().size(), 16u);
}

// A default derived from other keys is read as any default but left out of resolved(), so that the
// config read again with those keys changed derives it afresh; resolved_with_derived() holds it
// where it was read, in a list too, as resolved() did before.
TEST(Config, DerivedDefaultsAreLeftOutOfTheResolvedConfig) {
  auto config = Config::parse("heads: 4\nsets: [{name: a}, {name: b, heads: 2}]\n", "test.yaml");
  ConfigNode root = config->root();
  EXPECT_EQ(root.derived_integer("kv_heads", root.integer("heads")), 4);
  const std::vector<ConfigNode> sets = root.at("sets").elements();
  EXPECT_EQ(sets[0].derived_integer("heads", 4), 4);
  EXPECT_EQ(sets[1].derived_integer("heads", 4), 2);
  EXPECT_EQ(sets[0].derived_number("rate", 0.5), 0.5);
  for (const ConfigNode& set : sets) set.string("name");
  config->check_no_unknown_keys();
  EXPECT_EQ(config->resolved(), "heads: 4\nsets: [{name: a}, {name: b, heads: 2}]");
  EXPECT_EQ(config->resolved_with_derived(),
            "heads: 4\nsets: [{name: a, heads: 4, rate: 0.5}, {name: b, heads: 2}]\nkv_heads: 4");
  EXPECT_EQ(config->hash(), Config::parse(config->resolved(), "again.yaml")->hash());
}

TEST(Config, UnknownKeysAreFoundWithTheirLineAndANearMiss) {
  std::string text = kProblem;
  text += "trian:\n  steps: 3\n";
  auto config = Config::parse(text, "problem.yaml");
  read_problem(*config);
  std::string message = error_of([&] { config->check_no_unknown_keys(); });
  EXPECT_NE(message.find("problem.yaml:10:1: unknown key 'trian' in (top level) (did you mean 'train'?)"),
            std::string::npos)
      << message;

  auto nested = Config::parse("train:\n  adam:\n    stpes: 5\n", "p.yaml");
  read_problem(*nested);
  message = error_of([&] { nested->check_no_unknown_keys(); });
  EXPECT_NE(message.find("p.yaml:3:5: unknown key 'stpes' in train.adam (did you mean 'steps'?)"), std::string::npos)
      << message;
}

TEST(Config, TypeErrorsNameFileLineColumnAndPath) {
  auto config = Config::parse("train:\n  adam:\n    lr: fast\n", "p.yaml");
  std::string message = error_of([&] { config->root().at("train").at("adam").number("lr"); });
  EXPECT_EQ(message, "p.yaml:3:9: train.adam.lr: expected a number, got 'fast'");
  message = error_of([&] { config->root().at("train").at("adam").integer("steps"); });
  EXPECT_NE(message.find("train.adam: missing required key 'steps'"), std::string::npos) << message;
  auto choice = Config::parse("activation: tnah\n", "p.yaml");
  message = error_of([&] { choice->root().choice("activation", {"tanh", "sin", "gelu"}, "tanh"); });
  EXPECT_NE(message.find("p.yaml:1:13: activation: 'tnah' is not one of: tanh, sin, gelu (did you mean 'tanh'?)"),
            std::string::npos)
      << message;
  auto list = Config::parse("points: {a: 1}\n", "p.yaml");
  EXPECT_NE(error_of([&] { list->root().at("points").as_numbers(); }).find("expected a list"), std::string::npos);
  // YAML's infinities and NaN are numbers to YAML, not to any setting (a learning rate of .inf got
  // past `eddy lm check` and failed in the optimiser without a key).
  for (const char* value : {".inf", "-.Inf", ".nan"}) {
    auto infinite = Config::parse(std::string("lr: ") + value + "\n", "p.yaml");
    EXPECT_EQ(error_of([&] { infinite->root().number("lr"); }),
              std::string("p.yaml:1:5: lr: expected a finite number, got '") + value + "'");
  }
}

enum class Activation { tanh, sin, gelu };
const std::vector<std::pair<std::string, Activation>> kActivations{
    {"tanh", Activation::tanh}, {"sin", Activation::sin}, {"gelu", Activation::gelu}};

TEST(Config, ChoicesBecomeEnumsWithTheDefaultWrittenByName) {
  auto config = Config::parse("model: {activation: gelu}\n", "p.yaml");
  ConfigNode model = config->root().at("model");
  EXPECT_EQ(model.choice("activation", kActivations, Activation::tanh), Activation::gelu);
  EXPECT_EQ(model.at("activation").as_choice(kActivations), Activation::gelu);
  EXPECT_EQ(model.choice("output", kActivations, Activation::sin), Activation::sin);
  EXPECT_NE(config->resolved().find("output: sin"), std::string::npos) << config->resolved();
  auto typo = Config::parse("activation: gleu\n", "p.yaml");
  EXPECT_EQ(error_of([&] { typo->root().choice("activation", kActivations, Activation::tanh); }),
            "p.yaml:1:13: activation: 'gleu' is not one of: tanh, sin, gelu (did you mean 'gelu'?)");
}

TEST(Config, OverridesReplaceAndCreateKeysAndAreNamedInErrors) {
  auto config = Config::parse(kProblem, "problem.yaml",
                              {"train.adam.steps=20000", "model.width=64", "output.dir=runs/big"});
  ConfigNode root = config->root();
  EXPECT_EQ(root.at("train").at("adam").integer("steps"), 20000);
  EXPECT_EQ(root.at("model").integer("width"), 64);
  EXPECT_EQ(root.section("output").string("dir", "x"), "runs/big");

  // Whole numbers in exponent or decimal form are integers; fractions and out-of-range ones are not.
  auto exponent = Config::parse(kProblem, "problem.yaml", {"train.adam.steps=2e4", "model.width=64.0"});
  EXPECT_EQ(exponent->root().at("train").at("adam").integer("steps"), 20000);
  EXPECT_EQ(exponent->root().at("model").integer("width"), 64);
  for (const char* value : {"2.5e0", "1e19", "-1e19", ".nan"}) {
    auto not_whole = Config::parse(kProblem, "problem.yaml", {std::string("model.width=") + value});
    EXPECT_EQ(error_of([&] { not_whole->root().at("model").integer("width"); }),
              std::string("command-line override 'model.width=") + value + "': model.width: expected an integer, got '" +
                  value + "'");
  }

  // " #" starts a YAML comment: output.dir=runs/exp #1 wrote runs/exp, over another run's results.
  EXPECT_EQ(error_of([&] { Config::parse(kProblem, "problem.yaml", {"output.dir=runs/exp #1"}); }),
            "command-line override 'output.dir=runs/exp #1': ' #' starts a YAML comment, which drops the rest of "
            "the value (output.dir would be runs/exp); quote the value in YAML: output.dir='runs/exp #1', within the "
            "shell's own quotes");
  EXPECT_EQ(Config::parse(kProblem, "problem.yaml", {"output.dir='runs/exp #1'"})->root().section("output").string("dir", ""),
            "runs/exp #1");
  // A text YAML reads as no document ('%' starts a directive) is taken as it is, its '#' included.
  EXPECT_EQ(Config::parse(kProblem, "problem.yaml", {"description=% #"})->root().string("description", ""), "% #");
  // A quote in the value is doubled in the quoting suggested, as YAML writes it there.
  EXPECT_NE(error_of([&] { Config::parse(kProblem, "problem.yaml", {"description=it's #1"}); })
                .find("description='it''s #1', within"),
            std::string::npos);
  EXPECT_EQ(Config::parse(kProblem, "problem.yaml", {"output.dir=runs/exp#1"})->root().section("output").string("dir", ""),
            "runs/exp#1");

  auto bad = Config::parse(kProblem, "problem.yaml", {"model.width=wide"});
  EXPECT_EQ(error_of([&] { bad->root().at("model").integer("width"); }),
            "command-line override 'model.width=wide': model.width: expected an integer, got 'wide'");
  auto typo = Config::parse(kProblem, "problem.yaml", {"model.widht=3"});
  read_problem(*typo);
  std::string message = error_of([&] { typo->check_no_unknown_keys(); });
  EXPECT_NE(message.find("command-line override 'model.widht=3': unknown key 'widht' in model (did you mean 'width'?)"),
            std::string::npos)
      << message;
  EXPECT_NE(error_of([&] { Config::parse(kProblem, "p", {"noequals"}); }).find("expected key.path=value"),
            std::string::npos);
  EXPECT_NE(error_of([&] { Config::parse(kProblem, "p", {"points.x=1"}); }).find("'points' is not a map"),
            std::string::npos);
  // An unknown key inside an override's value, or on the path an override wrote, names the
  // override (they were placed in the file: at "problem.yaml" alone, or at the override text's
  // own line and column).
  auto inside = Config::parse(kProblem, "problem.yaml", {"model={width: 8, widht: 9}"});
  read_problem(*inside);
  EXPECT_EQ(error_of([&] { inside->check_no_unknown_keys(); }).substr(0, 80),
            "command-line override 'model={width: 8, widht: 9}': unknown key 'widht' in model");
  auto path_typo = Config::parse(kProblem, "problem.yaml", {"trian.adam.steps=3"});
  read_problem(*path_typo);
  EXPECT_EQ(error_of([&] { path_typo->check_no_unknown_keys(); }).substr(0, 78),
            "command-line override 'trian.adam.steps=3': unknown key 'trian' in (top level)");
  // An error at a line of the file, about a map that overrides changed below it, names them too.
  auto below = Config::parse(kProblem, "problem.yaml", {"model.width=4", "model.activation=sin"});
  EXPECT_EQ(error_of([&] { below->root().at("model").fail("too small"); }),
            "problem.yaml:6:3 (with command-line overrides 'model.activation=sin', 'model.width=4'): model: too "
            "small");
  // PyYAML reads the key `on:` as true, so a dict built from it says "true".
  auto boolean_on = Config::parse("walls: {true: x == 0}\n", "python-dict");
  boolean_on->root().at("walls").has("on");
  EXPECT_NE(error_of([&] { boolean_on->check_no_unknown_keys(); })
                .find("unknown key 'true' in walls (did you mean 'on'? PyYAML reads the key `on:` as true)"),
            std::string::npos);
  // A value that is not YAML, such as a glob (* starts an alias), is taken as its text.
  auto glob = Config::parse(kProblem, "p", {"data.files=*", "data.exclude=*.dat"});
  EXPECT_EQ(glob->root().at("data").string("files"), "*");
  EXPECT_EQ(glob->root().at("data").string("exclude"), "*.dat");
}

TEST(Config, YamlSyntaxErrorsCarryTheirPosition) {
  std::string message = error_of([] { Config::parse("a: [1, 2\nb: 3\n", "broken.yaml"); });
  EXPECT_NE(message.find("broken.yaml:"), std::string::npos) << message;
  EXPECT_NE(message.find("YAML syntax error"), std::string::npos) << message;
  // yaml-cpp's message for a tab that indents points at the next colon and says nothing of tabs.
  message = error_of([] { Config::parse("a: 1\ngeometry:\n\tspace: {type: interval}\n", "tab.yaml"); });
  EXPECT_NE(message.find("tab.yaml:3:"), std::string::npos) << message;
  EXPECT_NE(message.find("(the line is indented with a tab: YAML indents with spaces only)"), std::string::npos)
      << message;
  EXPECT_EQ(error_of([] { Config::parse("a: [1, 2\nb:\t3\n", "b.yaml"); }).find("tab"), std::string::npos);
  // A tab inside an earlier scalar's text is no fault of the line the error is on.
  EXPECT_EQ(error_of([] { Config::parse("d: \"one\n\ttwo\"\nseed: [1, 2\n", "q.yaml"); }).find("tab"),
            std::string::npos);
  EXPECT_NE(error_of([] { Config::parse("- 1\n- 2\n", "list.yaml"); }).find("top level must be a map"),
            std::string::npos);
  EXPECT_NE(error_of([] { Config::load("/nonexistent/problem.yaml"); }).find("cannot open /nonexistent/problem.yaml"),
            std::string::npos);
}

TEST(Config, ADuplicateKeyIsAnErrorAtItsSecondOccurrence) {
  // yaml-cpp itself keeps the first value and drops the second without a word.
  EXPECT_EQ(error_of([] { Config::parse("model:\n  width: 20\n  depth: 3\n  width: 64\n", "p.yaml"); }),
            "p.yaml:4:3: model: key 'width' is given twice (first at line 2, column 3); give each key once");
  EXPECT_EQ(error_of([] { Config::parse("a: 1\nb: [{c: 1, c: 2}]\n", "p.yaml"); }),
            "p.yaml:2:12: b[0]: key 'c' is given twice (first at line 2, column 6); give each key once");
  EXPECT_EQ(error_of([] { Config::parse(kProblem, "p.yaml", {"model={width: 1, width: 2}"}); }),
            "command-line override 'model={width: 1, width: 2}': model: key 'width' is given twice; give each key once");
  // The same name in different maps is no duplicate.
  EXPECT_NO_THROW(Config::parse("a: {x: 1}\nb: {x: 2}\n", "p.yaml"));
}

TEST(Config, ADirectoryIsNotReadAsAnEmptyFile) {
  const std::string directory = ::testing::TempDir();
  EXPECT_EQ(error_of([&] { Config::load(directory); }), directory + " is a directory, not a file");
}

TEST(Config, ABinaryFileIsNamedForWhatItIs) {
  EXPECT_EQ(error_of([&] { Config::parse(std::string("\x89HDF\r\n\x1a\n\0\0", 10), "tr.h5"); }),
            "tr.h5 is an HDF5 file, not a YAML config");
  EXPECT_EQ(error_of([&] { Config::parse(std::string("\x10\0\0\0\0\0\0\0{\"a\": 1}", 16), "w.safetensors"); }),
            "w.safetensors is a safetensors file, not a YAML config");
  EXPECT_EQ(error_of([&] { Config::parse(std::string("a: 1\n\0", 6), "x.bin"); }), "x.bin is a binary file, not a YAML config");
}

// Each of these ran with another meaning than the file's, without a word.
TEST(Config, EmptyValuesAreRefusedNotTakenForTheDefault) {
  // `rar:` read as absent (off) where `rar: {}` turns it on with its defaults.
  EXPECT_EQ(error_of([&] { Config::parse("sampling:\n  rar:\ntraining: {}\n", "e.yaml"); }),
            "e.yaml:2:3: sampling.rar: has no value; give one, {} for a section with its defaults, or leave the key "
            "out for its default");
  EXPECT_EQ(error_of([&] { Config::parse("a: [1, ~]\n", "e.yaml"); }), "e.yaml:1:8: a[1]: is empty; give a value");
  // An unset shell variable in `steps=$STEPS`.
  EXPECT_EQ(error_of([&] { Config::parse("steps: 2\n", "e.yaml", {"steps="}); }),
            "command-line override 'steps=': gives no value (nothing after '=', or only a comment); give one, or {} "
            "for a section with its defaults");
  EXPECT_NE(error_of([&] { Config::parse("steps: 2\n", "e.yaml", {"steps=null"}); }).find("gives no value"),
            std::string::npos);
  // A key path ending in a dot set the key before it.
  EXPECT_EQ(error_of([&] { Config::parse("seed: 2\n", "e.yaml", {"seed.=3"}); }),
            "command-line override 'seed.=3': empty key in 'seed.'");
  // Texts that YAML reads as no document at all are the text itself: '%' (a directive), '---'.
  for (const std::string separator : {"%", "%%", "---", "..."}) {
    auto config = Config::parse("data: {separator: x}\n", "e.yaml", {"data.separator=" + separator});
    EXPECT_EQ(config->root().at("data").string("separator"), separator);
  }
}

TEST(Config, IntegersAreDecimal) {
  // 010 was octal 8 for integer keys (10 for number keys and for PyYAML); 0x10 was 16.
  auto config = Config::parse("width: 010\nseed: 0x10\npoints: 100\nzero: 0\nnegative: -12\n", "i.yaml");
  EXPECT_EQ(error_of([&] { config->root().integer("width"); }),
            "i.yaml:1:8: width: expected a decimal integer, got '010': a leading 0 (or 0x, 0o) reads as another base "
            "to some YAML readers; write it without");
  EXPECT_NE(error_of([&] { config->root().integer("seed"); }).find("expected a decimal integer, got '0x10'"),
            std::string::npos);
  EXPECT_EQ(config->root().integer("points"), 100);
  EXPECT_EQ(config->root().integer("zero"), 0);
  EXPECT_EQ(config->root().integer("negative"), -12);
}

TEST(Config, OneDocumentNoMergeKeysAndNoSharedSections) {
  // The second document was dropped silently, unknown keys and all.
  EXPECT_EQ(error_of([&] { Config::parse("a: 1\n---\nb: {bogus: 1}\n", "d.yaml"); }),
            "d.yaml:3:1: a second YAML document (after --- or ...); eddy reads one document a file");
  EXPECT_EQ(error_of([&] { Config::parse("base: &b {x: 1}\nright: {<<: *b, y: 2}\n", "m.yaml"); }),
            "m.yaml:2:9: right: uses a merge key (<<:), which eddy does not read; write the keys out");
  // A shared section took the defaults its first reader wrote (a test set named `train`); nested
  // aliases of lists also expanded exponentially.
  EXPECT_NE(error_of([&] { Config::parse("train: &t {input: a}\ntest: *t\n", "s.yaml"); })
                .find("test: is an alias of a map or list given earlier"),
            std::string::npos);
  EXPECT_NE(error_of([&] { Config::parse("[a, b]: 1\n", "k.yaml"); }).find("has a key that is not a name"),
            std::string::npos);
}

// An override of a value the file shares through an alias changed every use of it.
TEST(Config, AnOverrideOfAnAliasedValueChangesThatPlaceOnly) {
  auto config = Config::parse("a: {points: &n 100}\nb: {points: *n}\n", "alias.yaml", {"b.points=5"});
  EXPECT_EQ(config->root().at("a").integer("points"), 100);
  EXPECT_EQ(config->root().at("b").integer("points"), 5);
}

// yaml-cpp wrote the default 0.1 as 0.10000000000000001 into resolved configs and messages.
TEST(Config, DefaultNumbersAreWrittenShortest) {
  auto config = Config::parse("a: 1\n", "d.yaml");
  EXPECT_EQ(config->root().number("rate", 0.1), 0.1);
  EXPECT_EQ(config->root().number("tiny", 1e-300), 1e-300);
  EXPECT_NE(config->resolved().find("rate: 0.1\n"), std::string::npos) << config->resolved();
  EXPECT_NE(config->resolved().find("tiny: 1e-300"), std::string::npos) << config->resolved();
}

TEST(Config, AMissingKeyNamesAGivenNearMiss) {
  auto config = Config::parse("disk: {centre: [0, 0], radius: 1}\n", "d.yaml");
  EXPECT_EQ(error_of([&] { config->root().at("disk").at("center"); }),
            "d.yaml:1:7: disk: missing required key 'center' (is 'centre' a misspelling of it?)");
  // A key named otherwise is near no spelling of the missing one: the keys given show it.
  EXPECT_EQ(error_of([&] { config->root().at("disk").at("height"); }),
            "d.yaml:1:7: disk: missing required key 'height' (the keys given here: centre, radius)");
  // The defaults read before were not given.
  EXPECT_EQ(config->root().at("disk").integer("sides", 4), 4);
  EXPECT_EQ(error_of([&] { config->root().at("disk").at("height"); }),
            "d.yaml:1:7: disk: missing required key 'height' (the keys given here: centre, radius)");
}

// The entries of a list of sections are checked for unknown keys as a section is.
TEST(Config, UnknownKeysInAListOfSectionsAreFound) {
  auto config = Config::parse("sets:\n  - {name: a}\n  - {name: b, strid: 2}\n", "list.yaml");
  for (const ConfigNode& entry : config->root().at("sets").elements()) {
    entry.string("name");
    entry.integer("stride", 1);
  }
  EXPECT_EQ(error_of([&] { config->check_no_unknown_keys(); }),
            "list.yaml:3:15: unknown key 'strid' in sets[1] (did you mean 'stride'?); valid keys: name, stride");
}

// Files a config reads are found beside it; command-line paths from where they were typed; both
// are written back absolute, so the resolved config names what was read.
TEST(Config, InputPathsAreRelativeToTheConfigFileAndOverridesToTheWorkingDirectory) {
  namespace fs = std::filesystem;
  const fs::path folder = fs::path(::testing::TempDir()) / cat("eddy_paths_", ::getpid()) / "problems";
  fs::create_directories(folder);
  std::ofstream(folder / "p.yaml") << "data: {file: ../data/a.h5, reference: /abs/ref.h5, none: ''}\n"
                                       "corpus: [text/*.txt, more.txt]\n";
  const std::string cwd = fs::current_path().string();
  auto read_paths = [](Config& config) {
    ConfigNode data = config.root().at("data");
    std::vector<std::string> paths{data.input_path("file"), data.input_path("reference"), data.input_path("none"),
                                   data.input_path("tokenizer", "")};
    for (const ConfigNode& pattern : config.root().at("corpus").elements()) paths.push_back(pattern.as_input_path());
    return paths;
  };
  const std::string parent = folder.parent_path().string();
  auto config = Config::load((folder / "p.yaml").string());
  EXPECT_EQ(read_paths(*config), (std::vector<std::string>{parent + "/data/a.h5", "/abs/ref.h5", "", "",
                                                           folder.string() + "/text/*.txt",
                                                           folder.string() + "/more.txt"}));
  EXPECT_NE(config->resolved().find("file: " + parent + "/data/a.h5"), std::string::npos) << config->resolved();

  auto overridden = Config::load((folder / "p.yaml").string(), {"data.file=b.h5", "corpus=[c.txt]"});
  EXPECT_EQ(read_paths(*overridden), (std::vector<std::string>{cwd + "/b.h5", "/abs/ref.h5", "", "", cwd + "/c.txt"}));

  // An old run folder's config.yaml holds paths relative to where the run was started.
  auto old_run = Config::load((folder / "p.yaml").string(), {}, Config::RelativePaths::working_directory);
  EXPECT_EQ(read_paths(*old_run)[0], (fs::current_path().parent_path() / "data/a.h5").string());
  // Text that is not a file (a Python dict) has no folder of its own.
  auto text = Config::parse("data: {file: a.h5, reference: r.h5, none: ''}\ncorpus: []\n", "python-dict");
  EXPECT_EQ(read_paths(*text)[0], cwd + "/a.h5");
  fs::remove_all(folder.parent_path());
}

// A pattern's folder is taken literally: a config in "exp[1]" with files: "*.txt" read exp1's files
// (the brackets were a character class), and one in "q?m" read qZm's too.
TEST(Config, APatternsFolderIsLiteralWhateverItsName) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(::testing::TempDir()) / cat("eddy_glob_", ::getpid());
  for (const char* name : {"exp[1]", "exp1"}) {
    fs::create_directories(root / name);
    std::ofstream(root / name / "a.txt") << name;
  }
  std::ofstream(root / "exp[1]" / "p.yaml") << "corpus: ['*.txt']\n";
  auto config = Config::load((root / "exp[1]" / "p.yaml").string());
  const std::string pattern = config->root().at("corpus").elements().front().as_input_pattern();
  EXPECT_EQ(pattern, fs::absolute(root).lexically_normal().string() + "/exp\\[1\\]/*.txt");
  glob_t matches{};
  ASSERT_EQ(glob(pattern.c_str(), 0, nullptr, &matches), 0);
  std::vector<std::string> found(matches.gl_pathv, matches.gl_pathv + matches.gl_pathc);
  globfree(&matches);
  EXPECT_EQ(found, std::vector<std::string>{(root / "exp[1]" / "a.txt").string()});
  // A path to read is not a pattern: its brackets stay as they are.
  EXPECT_EQ(Config::load((root / "exp[1]" / "p.yaml").string())->root().at("corpus").elements().front().as_input_path(),
            (root / "exp[1]" / "*.txt").string());
  fs::remove_all(root);
}

TEST(Config, ALeadingTildeIsTheHomeFolderInInputAndOutputPaths) {
  const char* home = std::getenv("HOME");
  ASSERT_TRUE(home && *home) << "HOME is not set";
  auto config = Config::parse("data: {file: ~/data/a.h5, odd: ~user/b.h5, home: '~'}\noutput: {dir: ~/runs/x, plain: runs/y}\n",
                              "paths.yaml");
  ConfigNode data = config->root().at("data");
  EXPECT_EQ(data.input_path("file"), std::string(home) + "/data/a.h5");
  EXPECT_EQ(data.input_path("home"), std::filesystem::path(home).lexically_normal().string());
  // Only the current user's "~/" is expanded; "~user" stays a name relative to the folder.
  EXPECT_EQ(data.input_path("odd"), (std::filesystem::current_path() / "~user/b.h5").string());
  ConfigNode output = config->root().at("output");
  EXPECT_EQ(output.at("dir").as_output_path(), std::string(home) + "/runs/x");
  EXPECT_EQ(output.at("plain").as_output_path(), "runs/y");
  EXPECT_NE(config->resolved().find(std::string("dir: ") + home + "/runs/x"), std::string::npos) << config->resolved();
}

TEST(Suggest, EditDistanceCountsSwapsAsOneEdit) {
  EXPECT_EQ(edit_distance("train", "trian"), 1u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(nearest_name("widht", {"width", "depth", "activation"}), "width");
  EXPECT_EQ(nearest_name("xyz", {"width", "depth"}), "");
  EXPECT_EQ(did_you_mean("lrr", {"lr", "steps"}), " (did you mean 'lr'?)");
}

}  // namespace
}  // namespace eddy::io

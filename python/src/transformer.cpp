// eddy.nn's language models: GPT2 and Llama (src/eddy/nn/transformer.h) with their Hugging Face
// parameter names, generation with the KV cache (generation.h), and the pieces a user composes
// their own transformer from: cross_entropy, causal_attention, rotary_embedding, RMSNorm.

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "eddy/core/error.h"
#include "eddy/nn/generation.h"
#include "eddy/nn/transformer.h"
#include "eddy/ops/ops.h"

namespace eddy::python {
void bind_transformers(py::module_& nn) {
  nn.def("cross_entropy",
         [](const py::object& logits, const py::object& targets, int64_t ignore_index, const std::string& reduction) {
           EDDY_CHECK(reduction == "mean" || reduction == "sum", "cross_entropy: reduction must be 'mean' or 'sum', "
                      "got '", reduction, "' (per-row losses: logsumexp(logits, -1) minus each row's target logit)");
           return cross_entropy(as_tensor(logits), as_tensor(targets), ignore_index,
                                reduction == "mean" ? Reduction::mean : Reduction::sum);
         },
         py::arg("logits"), py::arg("targets"), py::arg("ignore_index") = -100, py::arg("reduction") = "mean",
         "-log softmax(logits)[target] from logits [..., classes] and integer targets [...], as PyTorch's with "
         "reduction 'mean' or 'sum' (not 'none'); targets equal to ignore_index count for nothing.");
  nn.def("causal_attention",
         [](const py::object& q, const py::object& k, const py::object& v) {
           return nn::causal_attention(as_tensor(q), as_tensor(k), as_tensor(v));
         },
         py::arg("queries"), py::arg("keys"), py::arg("values"),
         "softmax(q k^T / sqrt(d)) v over the visible keys: q [B, H, T, d], k and v [B, kv_heads, S, d] "
         "(grouped-query when kv_heads < H) -> [B, H, T, d]. On the CPU one fused primitive (blocked, no "
         "T x S matrix stored); elsewhere composed_causal_attention.");
  nn.def("composed_causal_attention",
         [](const py::object& q, const py::object& k, const py::object& v) {
           return nn::composed_causal_attention(as_tensor(q), as_tensor(k), as_tensor(v));
         },
         py::arg("queries"), py::arg("keys"), py::arg("values"),
         "causal_attention composed of primitives: two products and a masked softmax, the T x S weights "
         "stored for the backward pass.");
  nn.def("rotary_embedding",
         [](const py::object& x, double theta, int64_t first_position) {
           return nn::rotary_embedding(as_tensor(x), theta, first_position);
         },
         py::arg("x"), py::arg("theta") = 10000.0, py::arg("first_position") = 0,
         "RoPE in Llama's rotate-half layout on x [..., T, head_dim].");

  py::class_<nn::RmsNorm, nn::Module, py::smart_holder>(nn, "RMSNorm", py::is_final())
      .def(py::init([](int64_t dim, double eps, const py::object& dtype) {
             return std::make_shared<nn::RmsNorm>(dim, eps, model_dtype(dtype));
           }),
           py::arg("dim"), py::arg("eps") = 1e-6, py::arg("dtype") = py::none())
      .def_readonly("weight", &nn::RmsNorm::weight);

  py::class_<nn::CausalLanguageModel, nn::Module, py::smart_holder>(
      nn, "CausalLanguageModel", "A decoder-only language model: tokens [batch, T] -> logits [batch, T, vocab].")
      .def_property_readonly("vocab_size", &nn::CausalLanguageModel::vocab_size)
      .def_property_readonly("context_length", &nn::CausalLanguageModel::context_length)
      .def(
          "generate",
          [](nn::CausalLanguageModel& model, const std::vector<int32_t>& prompt, int64_t max_new_tokens,
             double temperature, int64_t top_k, double top_p, uint64_t seed, const std::vector<int32_t>& stop_tokens,
             const py::object& on_token) {
            nn::GenerationOptions options;
            options.max_new_tokens = max_new_tokens;
            options.temperature = temperature;
            options.top_k = top_k;
            options.top_p = top_p;
            options.seed = seed;
            options.stop_tokens = stop_tokens;
            std::function<void(int32_t)> stream;
            if (!on_token.is_none()) stream = [&on_token](int32_t id) { on_token(id); };
            return nn::generate(model, prompt, options, stream);
          },
          py::arg("prompt"), py::arg("max_new_tokens") = 64, py::arg("temperature") = 1.0, py::arg("top_k") = 0,
          py::arg("top_p") = 1.0, py::arg("seed") = 0, py::arg("stop_tokens") = std::vector<int32_t>{},
          py::arg("on_token") = py::none(),
          "Continues the token ids `prompt` with the KV cache and returns the new ids, calling on_token(id) as "
          "each is chosen; temperature 0 is greedy, and the same seed gives the same ids.");

  py::class_<nn::Gpt2Model, nn::CausalLanguageModel, py::smart_holder>(
      nn, "GPT2", py::is_final(), "GPT-2 with its language-model head, parameters named as transformers' GPT2LMHeadModel.")
      .def(py::init([](int64_t vocab_size, int64_t context_length, int64_t hidden_size, int64_t layers, int64_t heads,
                       int64_t intermediate_size, double dropout, bool tie_embeddings, const py::object& dtype,
                       const py::object& seed, double layer_norm_epsilon) {
             nn::Gpt2Options o;
             o.norm_eps = layer_norm_epsilon;
             o.vocab_size = vocab_size;
             o.context_length = context_length;
             o.hidden_size = hidden_size;
             o.layers = layers;
             o.heads = heads;
             o.intermediate_size = intermediate_size;
             // Named as the Python argument: the C++ check names the three rates it sets.
             EDDY_CHECK(dropout >= 0 && dropout < 1, "GPT2: dropout must be in [0, 1), got ", dropout);
             o.embedding_dropout = o.attention_dropout = o.residual_dropout = dropout;
             o.tie_embeddings = tie_embeddings;
             o.dtype = model_dtype(dtype);
             o.seed = model_seed(seed);
             return std::make_shared<nn::Gpt2Model>(o);
           }),
           py::arg("vocab_size"), py::arg("context_length") = 1024, py::arg("hidden_size") = 768,
           py::arg("layers") = 12, py::arg("heads") = 12, py::arg("intermediate_size") = 0, py::arg("dropout") = 0.0,
           py::arg("tie_embeddings") = true, py::arg("dtype") = py::none(), py::arg("seed") = py::none(),
           py::arg("layer_norm_epsilon") = 1e-5);

  py::class_<nn::LlamaModel, nn::CausalLanguageModel, py::smart_holder>(
      nn, "Llama", py::is_final(), "Llama with its language-model head, parameters named as transformers' LlamaForCausalLM.")
      .def(py::init([](int64_t vocab_size, int64_t context_length, int64_t hidden_size, int64_t intermediate_size,
                       int64_t layers, int64_t heads, int64_t kv_heads, double rope_theta, bool tie_embeddings,
                       const py::object& dtype, const py::object& seed, double rms_norm_eps, bool attention_bias,
                       bool mlp_bias) {
             // transformers' names: a checkpoint with rms_norm_eps 1e-5 (Llama 2, Mistral) loaded
             // into the fixed 1e-6 gave other logits, silently.
             nn::LlamaOptions o;
             o.norm_eps = rms_norm_eps;
             o.attention_bias = attention_bias;
             o.mlp_bias = mlp_bias;
             o.vocab_size = vocab_size;
             o.context_length = context_length;
             o.hidden_size = hidden_size;
             o.intermediate_size = intermediate_size;
             o.layers = layers;
             o.heads = heads;
             o.kv_heads = kv_heads;
             o.rope_theta = rope_theta;
             o.tie_embeddings = tie_embeddings;
             o.dtype = model_dtype(dtype);
             o.seed = model_seed(seed);
             return std::make_shared<nn::LlamaModel>(o);
           }),
           py::arg("vocab_size"), py::arg("context_length") = 2048, py::arg("hidden_size") = 512,
           py::arg("intermediate_size") = 1376, py::arg("layers") = 8, py::arg("heads") = 8, py::arg("kv_heads") = 0,
           py::arg("rope_theta") = 10000.0, py::arg("tie_embeddings") = false, py::arg("dtype") = py::none(),
           py::arg("seed") = py::none(), py::arg("rms_norm_eps") = 1e-6, py::arg("attention_bias") = false,
           py::arg("mlp_bias") = false);
}

}  // namespace eddy::python

/* Unit tests of lib/formats/safetensors.c's parsers: header, config.json, index. */
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "../../lib/formats/safetensors.h"
#include "../../lib/formats/stwrite.h"
#include "tap.h"

static int parse(const char *json, uint64_t data_len, struct sw_err *err, size_t *n)
{
	struct st_header h;
	int rc = st_parse_header(json, strlen(json), data_len, NULL, &h, err);

	if (n)
		*n = h.n;
	st_header_free(&h);
	return rc;
}

int main(void)
{
	struct sw_err err;
	struct sw_config c;
	size_t n;

	ok(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
		 "\"__metadata__\":{\"format\":\"pt\"}}", 24, &err, &n) == SW_OK && n == 1,
	   "a valid header with metadata");
	ok(parse("{\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[8,16]},"
		 "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 16, &err, &n) == SW_OK && n == 2,
	   "entries in any order, data contiguous by offset");
	ok(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", 4, &err, NULL) == SW_OK,
	   "a scalar (shape [])");
	ok(parse("{}", 0, &err, &n) == SW_OK && n == 0, "no tensors, no data");
	ok(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12, &err, NULL) == SW_EDATA,
	   "data longer than the tensors: %s", err.msg);
	ok(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, &err, NULL) == SW_EDATA &&
	   strstr(err.msg, "overlap"), "overlapping ranges: %s", err.msg);
	ok(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, &err, NULL) == SW_EDATA &&
	   strstr(err.msg, "gap"), "a gap: %s", err.msg);
	ok(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, &err, NULL) == SW_EDATA,
	   "range shorter than numel x size");
	ok(parse("{\"a\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, &err, NULL) == SW_EDATA &&
	   strstr(err.msg, "unknown dtype 'Q4'"), "unknown dtype named: %s", err.msg);
	ok(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,8]}}",
		 8, &err, NULL) == SW_EDATA && strstr(err.msg, "overflow"), "numel overflow: %s", err.msg);
	ok(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, &err, NULL) == SW_EDATA,
	   "negative dimension");
	ok(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 8, &err, NULL) == SW_EDATA,
	   "fractional dimension");
	ok(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, &err, NULL) == SW_EDATA,
	   "begin after end");
	ok(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		 "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16, &err, NULL) == SW_EDATA &&
	   strstr(err.msg, "twice"), "duplicate name: %s", err.msg);
	ok(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, &err, NULL) == SW_EDATA, "missing data_offsets");
	ok(parse("{\"__metadata__\":{\"x\":1}}", 0, &err, NULL) == SW_EDATA, "metadata values must be strings");
	ok(parse("[1,2]", 0, &err, NULL) == SW_EDATA, "not an object");
	ok(parse("{\"a\":", 0, &err, NULL) == SW_EDATA, "cut JSON");
	ok(st_parse_header("", 0, 0, NULL, &(struct st_header){0}, &err) == SW_EDATA, "empty header");
	{
		/* a header that is not NUL-terminated must not be read past its length */
		char *buf = malloc(2);
		memcpy(buf, "{}", 2);
		struct st_header h;
		ok(st_parse_header(buf, 2, 0, NULL, &h, &err) == SW_OK && h.n == 0, "header read by length, not NUL");
		st_header_free(&h);
		free(buf);
	}

	/* config.json */
	const char *llama = "{\"architectures\":[\"LlamaForCausalLM\"],\"vocab_size\":32000,"
			    "\"hidden_size\":4096,\"intermediate_size\":11008,\"num_hidden_layers\":32,"
			    "\"num_attention_heads\":32,\"num_key_value_heads\":8,\"rms_norm_eps\":1e-5,"
			    "\"rope_theta\":500000.0,\"tie_word_embeddings\":false}";
	ok(st_parse_config(llama, strlen(llama), &c, &err) == SW_OK && !strcmp(c.arch, "llama") &&
	   c.head_dim == 128 && c.n_kv_heads == 8 && c.rope_theta == 5e5 && !c.tie_embeddings,
	   "Llama config: head_dim derived, GQA, rope_theta");
	const char *qwen3 = "{\"architectures\":[\"Qwen3ForCausalLM\"],\"vocab_size\":151936,"
			    "\"hidden_size\":1024,\"intermediate_size\":3072,\"num_hidden_layers\":28,"
			    "\"num_attention_heads\":16,\"num_key_value_heads\":8,\"head_dim\":128,"
			    "\"tie_word_embeddings\":true}";
	ok(st_parse_config(qwen3, strlen(qwen3), &c, &err) == SW_OK && c.head_dim == 128 && c.qk_norm &&
	   c.tie_embeddings && c.norm_eps == 1e-6, "Qwen3 config: explicit head_dim, QK-norm, tied");
	/* GPT-2 (a family the model computes under its own names): its
	 * type, its sizes under the names its class gives them */
	const char *gpt2 = "{\"architectures\":[\"GPT2LMHeadModel\"],\"n_embd\":768,\"n_layer\":12,"
			   "\"n_head\":12,\"vocab_size\":50257}";
	ok(st_parse_config(gpt2, strlen(gpt2), &c, &err) == SW_OK && !strcmp(c.arch, "gpt2") &&
	   c.d_model == 768 && c.n_layers == 12 && c.vocab_size == 50257 && c.d_ff == 4 * 768 &&
	   c.seq_len == 1024 && c.norm_eps == 1e-5 && !strcmp(c.hidden_act, "gelu_new") &&
	   c.tie_embeddings && c.head_dim == 64 && c.n_kv_heads == 12 && !c.unsupported[0],
	   "GPT-2 config read by its names, GPT2Config's defaults where it is silent");
	const char *gpt2all = "{\"architectures\":[\"GPT2LMHeadModel\"],\"n_embd\":64,\"n_layer\":2,"
			      "\"n_head\":4,\"n_inner\":null,\"n_positions\":128,"
			      "\"layer_norm_epsilon\":1e-6,\"activation_function\":\"relu\",\"vocab_size\":50}";
	ok(st_parse_config(gpt2all, strlen(gpt2all), &c, &err) == SW_OK && c.d_model == 64 &&
	   c.n_heads == 4 && c.head_dim == 16 && c.d_ff == 256 && c.seq_len == 128 &&
	   c.norm_eps == 1e-6 && !strcmp(c.hidden_act, "relu") && c.vocab_size == 50,
	   "GPT-2's keys: n_inner null is 4 n_embd, n_positions, layer_norm_epsilon, activation_function");
	const char *gpt2inner = "{\"architectures\":[\"GPT2LMHeadModel\"],\"n_embd\":64,\"n_inner\":100,"
				"\"n_layer\":2,\"n_head\":4,\"vocab_size\":50,\"activation_function\":7}";
	ok(st_parse_config(gpt2inner, strlen(gpt2inner), &c, &err) == SW_EDATA &&
	   strstr(err.msg, "activation_function"), "an activation_function that is no name refused: %s",
	   err.msg);
	gpt2inner = "{\"architectures\":[\"GPT2LMHeadModel\"],\"n_embd\":64,\"n_inner\":100,"
		    "\"n_layer\":2,\"n_head\":4,\"vocab_size\":50}";
	ok(st_parse_config(gpt2inner, strlen(gpt2inner), &c, &err) == SW_OK && c.d_ff == 100,
	   "GPT-2's n_inner given is d_ff");
	const char *gpt2bad = "{\"architectures\":[\"GPT2LMHeadModel\"],\"vocab_size\":50,\"n_embd\":64,"
			      "\"n_layer\":-1}";
	ok(st_parse_config(gpt2bad, strlen(gpt2bad), &c, &err) == SW_EDATA && strstr(err.msg, "n_layer"),
	   "its sizes are still sizes: %s", err.msg);
	const char *mixtral = "{\"architectures\":[\"MixtralForCausalLM\"],\"hidden_size\":64,"
			      "\"num_hidden_layers\":3,\"num_attention_heads\":4}";
	ok(st_parse_config(mixtral, strlen(mixtral), &c, &err) == SW_OK && !strcmp(c.arch, "mixtral") &&
	   c.n_layers == 3 && c.n_kv_heads == 4 && c.head_dim == 16 && !c.tie_embeddings,
	   "a family read for its matrices: its type, its sizes");
	const char *gemma = "{\"model_type\":\"gemma\",\"num_hidden_layers\":2,\"vocab_size\":64,"
			    "\"hidden_size\":16,\"num_attention_heads\":2,\"intermediate_size\":32}";
	ok(st_parse_config(gemma, strlen(gemma), &c, &err) == SW_OK && !strcmp(c.arch, "gemma") &&
	   c.tie_embeddings, "Gemma ties its head unless config.json says otherwise");
	const char *nolayers = "{\"model_type\":\"llama\",\"vocab_size\":10,\"hidden_size\":8,"
			       "\"intermediate_size\":16,\"num_attention_heads\":2}";
	ok(st_parse_config(nolayers, strlen(nolayers), &c, &err) == SW_EDATA &&
	   strstr(err.msg, "num_hidden_layers"), "missing field named: %s", err.msg);

	/* the keys that change the function: computed, kept by name, refused */
	{
		static const struct { const char *extra, *what; int rc; const char *type; double factor;
				      int64_t window, from; const char *act; } keys[] = {
			{",\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8.0,\"low_freq_factor\":1.0,"
			 "\"high_freq_factor\":4.0,\"original_max_position_embeddings\":8192}",
			 "llama3", SW_OK, "llama3", 8, 0, 0, ""},
			{",\"rope_scaling\":{\"type\":\"linear\",\"factor\":2}", "linear under type", SW_OK,
			 "linear", 2, 0, 0, ""},
			{",\"rope_scaling\":{\"rope_type\":\"default\"},\"hidden_act\":\"silu\"",
			 "default, silu: Llama's defaults", SW_OK, "", 0, 0, 0, ""},
			{",\"rope_scaling\":null,\"hidden_act\":\"gelu\"", "gelu kept by name", SW_OK, "", 0, 0, 0,
			 "gelu"},
			{",\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4}", "yarn kept by name", SW_OK,
			 "yarn", 0, 0, 0, ""},
			{",\"rope_scaling\":{\"rope_type\":\"llama3\",\"type\":\"linear\",\"factor\":2}",
			 "two types", SW_EDATA, NULL, 0, 0, 0, NULL},
			{",\"rope_scaling\":{\"rope_type\":\"linear\"}", "linear, no factor", SW_EDATA, NULL, 0,
			 0, 0, NULL},
			{",\"sliding_window\":16", "Llama: no window read", SW_OK, "", 0, 0, 0, ""},
		};
		static const struct { const char *json; int64_t window, from; } windows[] = {
			{"\"MistralForCausalLM\"]", 4096, 0},
			{"\"MistralForCausalLM\"],\"sliding_window\":null", 0, 0},
			{"\"MistralForCausalLM\"],\"sliding_window\":16", 16, 0},
			{"\"Qwen2ForCausalLM\"],\"sliding_window\":16", 0, 0},
			{"\"Qwen2ForCausalLM\"],\"sliding_window\":16,\"use_sliding_window\":true", 16, 28},
			{"\"Qwen2ForCausalLM\"],\"sliding_window\":16,\"use_sliding_window\":true,"
			 "\"max_window_layers\":30", 16, 30},
			{"\"Qwen2ForCausalLM\"],\"sliding_window\":16,\"use_sliding_window\":true,"
			 "\"layer_types\":[\"full_attention\",\"full_attention\",\"sliding_attention\"]", 16, 2},
		};
		char buf[1024];
		for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
			int rc;
			snprintf(buf, sizeof buf, "%.*s%s}", (int)strlen(llama) - 1, llama, keys[i].extra);
			rc = st_parse_config(buf, strlen(buf), &c, &err);
			ok(rc == keys[i].rc && (rc || (!strcmp(c.rope_type, keys[i].type) &&
						      c.rope_factor == keys[i].factor &&
						      c.sliding_window == keys[i].window &&
						      !strcmp(c.hidden_act, keys[i].act))),
			   "config.json, %s: %s", keys[i].what, rc ? err.msg : "read");
		}
		for (size_t i = 0; i < sizeof windows / sizeof windows[0]; i++) {
			snprintf(buf, sizeof buf, "{\"architectures\":[%s,\"vocab_size\":10,\"hidden_size\":8,"
				 "\"intermediate_size\":16,\"num_hidden_layers\":32,\"num_attention_heads\":2}",
				 windows[i].json);
			int rc = st_parse_config(buf, strlen(buf), &c, &err);
			ok(rc == SW_OK && c.sliding_window == windows[i].window &&
			   c.max_window_layers == windows[i].from,
			   "the window of %s: %lld from layer %lld", windows[i].json,
			   (long long)c.sliding_window, (long long)c.max_window_layers);
		}
	}

	/* index */
	struct st_index ix;
	const char *index = "{\"metadata\":{\"total_size\":8},\"weight_map\":{\"a\":\"m-1.safetensors\","
			    "\"b\":\"m-2.safetensors\"}}";
	ok(st_parse_index(index, strlen(index), &ix, &err) == SW_OK && ix.n == 2 &&
	   !strcmp(ix.e[1].name, "b") && !strcmp(ix.e[1].shard, "m-2.safetensors"), "index weight_map");
	st_index_free(&ix);
	const char *escape = "{\"weight_map\":{\"a\":\"../../etc/passwd\"}}";
	ok(st_parse_index(escape, strlen(escape), &ix, &err) == SW_EDATA && !ix.e,
	   "shard paths outside the directory refused");
	const char *twice = "{\"weight_map\":{\"a\":\"m-1.safetensors\",\"a\":\"m-2.safetensors\"}}";
	ok(st_parse_index(twice, strlen(twice), &ix, &err) == SW_EDATA && strstr(err.msg, "'a' appears twice"),
	   "a tensor listed twice in the index: %s", err.msg);
	const char *slash = "{\"weight_map\":{\"a/b\":\"m-1.safetensors\"}}";
	ok(st_parse_index(slash, strlen(slash), &ix, &err) == SW_EDATA && strstr(err.msg, "'a/b'"),
	   "a tensor name with '/' in the index: %s", err.msg);

	const char *walk = "{\"weight_map\":{\"\\u0061\":\"m-\\u0031.safetensors\",\"b\":[\"m-2.safetensors\"]},"
			   "\"metadata\":{\"weight_map\":1}}";
	ok(st_parse_index(walk, strlen(walk), &ix, &err) == SW_EDATA && strstr(err.msg, "entry 'b'"),
	   "a shard that is not a string, after an escaped entry: %s", err.msg);
	const char *none = "{\"metadata\":{\"weight_map\":{\"a\":\"m.safetensors\"}}}";
	ok(st_parse_index(none, strlen(none), &ix, &err) == SW_EDATA && strstr(err.msg, "no weight_map"),
	   "a weight_map only inside another object is no weight_map: %s", err.msg);
	const char *esc = "{\"weight_map\":{\"\\u0061\":\"m-\\u0031.safetensors\"},\"x\":[{}]}";
	ok(st_parse_index(esc, strlen(esc), &ix, &err) == SW_OK && ix.n == 1 && !strcmp(ix.e[0].name, "a") &&
	   !strcmp(ix.e[0].shard, "m-1.safetensors"), "index names and shards decoded, other keys passed");
	st_index_free(&ix);

	/* the header's walk: names decoded, keys it does not know passed
	 * over whole (their own keys still checked unique) */
	{
		const char *h = "{\"caf\\u00e9\":{\"x\":{\"shape\":[9]},\"dtype\":\"F32\",\"shape\":[ 2 ,1e0 ],"
				"\"data_offsets\":[0, 8],\"y\":\"}\"}}";
		struct st_header hd;
		ok(st_parse_header(h, strlen(h), 8, NULL, &hd, &err) == SW_OK && hd.n == 1 &&
		   !strcmp(hd.e[0].name, "caf\xc3\xa9") && hd.e[0].rank == 2 && hd.e[0].shape[0] == 2 &&
		   hd.e[0].shape[1] == 1 && !strcmp(hd.e[0].dtype_name, "F32"),
		   "an escaped name decoded; unknown keys passed; blanks and 1e0 in a shape");
		st_header_free(&hd);
		h = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":{\"k\":1,\"k\":2}}}";
		ok(parse(h, 4, &err, NULL) == SW_EDATA && strstr(err.msg, "'k' appears twice"),
		   "a key twice inside an unknown value: %s", err.msg);
		h = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,2,3,4,5,6,7,8,9],\"data_offsets\":[0,4]}}";
		ok(parse(h, 4, &err, NULL) == SW_EDATA && strstr(err.msg, "rank 9"), "rank 9: %s", err.msg);
		h = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,4]}}";
		ok(parse(h, 4, &err, NULL) == SW_EDATA && strstr(err.msg, "not [begin, end]"),
		   "three data_offsets: %s", err.msg);
		h = "{\"a\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}";
		ok(parse(h, 4, &err, NULL) == SW_EDATA && strstr(err.msg, "non-integer"),
		   "a dimension as a string: %s", err.msg);
		h = "{\"a\":{\"dtype\":[\"F32\"],\"shape\":[1],\"data_offsets\":[0,4]}}";
		ok(parse(h, 4, &err, NULL) == SW_EDATA && strstr(err.msg, "needs dtype"),
		   "a dtype that is not a string: %s", err.msg);
		h = "{\"a\":[],\"b\":{}}";
		ok(parse(h, 0, &err, NULL) == SW_EDATA && strstr(err.msg, "a: entry is not an object"),
		   "an entry that is not an object: %s", err.msg);
		h = "{\"__metadata__\":{\"k\\u00e9\":\"v\\n\"},\"a\":{\"dtype\":\"F32\",\"shape\":[],"
		    "\"data_offsets\":[0,4]}}";
		struct attr_map m;
		attrmap_init(&m);
		ok(st_parse_header(h, strlen(h), 4, &m, &hd, &err) == SW_OK && m.n == 1 &&
		   !strcmp(attrmap_get(&m, "k\xc3\xa9"), "v\n") && hd.n == 1 && hd.e[0].rank == 0,
		   "metadata keys and values decoded");
		st_header_free(&hd);
		attrmap_free(&m);
	}

	/* what the reference readers refuse (jsonstrict.h), in each parser */
	ok(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}}}garbage", 4, &err,
		 NULL) == SW_EDATA && strstr(err.msg, "bytes after the JSON value"),
	   "header followed by }}garbage: %s", err.msg);
	ok(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}    ", 4, &err,
		 NULL) == SW_OK, "header padded with spaces, as the reference writer pads it");
	ok(parse("{\"\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, &err,
		 NULL) == SW_EDATA && strstr(err.msg, "invalid UTF-8"), "a name of invalid UTF-8: %s", err.msg);
	ok(parse("{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, &err,
		 NULL) == SW_EDATA && strstr(err.msg, "NUL"), "a name with an escaped NUL: %s", err.msg);
	ok(parse("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, &err, NULL) == SW_EDATA &&
	   strstr(err.msg, "'k' appears twice"), "a metadata key twice: %s", err.msg);
	ok(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
		 "\"\\u0061\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, &err,
		 NULL) == SW_EDATA && strstr(err.msg, "twice"), "a name twice, once escaped: %s", err.msg);
	ok(parse("{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, &err, NULL) ==
	   SW_EDATA && strstr(err.msg, "empty name"), "an empty name: %s", err.msg);
	ok(parse("{\".\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, &err, NULL) ==
	   SW_EDATA && strstr(err.msg, "'.'"), "the name '.': %s", err.msg);
	ok(parse("{\"a/b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, &err, NULL) ==
	   SW_EDATA && strstr(err.msg, "'a/b'"), "a name with '/': %s", err.msg);
	ok(parse("{\"..\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, &err, NULL) ==
	   SW_OK, "'..' is a valid HDF5 dataset name, taken");
	const char *dup = "{\"architectures\":[\"LlamaForCausalLM\"],\"vocab_size\":32,\"hidden_size\":8,"
			  "\"intermediate_size\":16,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
			  "\"rope_theta\":10000.0,\"rope_theta\":1000000.0}";
	ok(st_parse_config(dup, strlen(dup), &c, &err) == SW_EDATA &&
	   !strcmp(err.msg, "config.json: key 'rope_theta' appears twice"),
	   "config.json with rope_theta twice: %s", err.msg);
	char garbage[512];
	snprintf(garbage, sizeof garbage, "%s\n{}", llama);
	ok(st_parse_config(garbage, strlen(garbage), &c, &err) == SW_EDATA &&
	   strstr(err.msg, "config.json is not valid JSON (byte ") && strstr(err.msg, "bytes after"),
	   "config.json followed by garbage: %s", err.msg);
	snprintf(garbage, sizeof garbage, "%s\n\r\t ", llama);
	ok(st_parse_config(garbage, strlen(garbage), &c, &err) == SW_OK,
	   "config.json followed by whitespace (Python's json takes it)");
	{
		struct attr_map m;
		attrmap_init(&m);
		const char *h = "{\"__metadata__\":{\"format\":\"pt\"},"
				"\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
		struct st_header hd;
		ok(st_parse_header(h, strlen(h), 4, &m, &hd, &err) == SW_OK && hd.n == 1 &&
		   m.n == 1 && !strcmp(attrmap_get(&m, "format"), "pt"),
		   "header and metadata in one pass");
		st_header_free(&hd);
		attrmap_free(&m);
	}
	/* the writer never writes what the readers refuse */
	{
		struct sw_tensor_info t = {.name = "__metadata__", .rank = 1, .shape = {1}, .numel = 1};
		struct attr_map m;
		struct stw *w;
		char path[] = "/tmp/t-safetensors-XXXXXX";
		int fd = mkstemp(path);

		close(fd);
		unlink(path);
		attrmap_init(&m);
		attrmap_set(&m, "format", "pt", &err);
		ok(stw_create_meta(path, &t, 1, SW_DTYPE_F32, &m, &w, &err) == SW_EDATA &&
		   strstr(err.msg, "key '__metadata__' appears twice") && access(path, F_OK) < 0,
		   "a tensor named __metadata__ beside metadata: refused, nothing written: %s", err.msg);
		snprintf(t.name, sizeof t.name, "x");
		attrmap_set(&m, "scalewatch.optim.schedule", "cos\xffine", &err);
		ok(stw_create_meta(path, &t, 1, SW_DTYPE_F32, &m, &w, &err) == SW_EDATA &&
		   strstr(err.msg, "invalid UTF-8") && access(path, F_OK) < 0,
		   "a metadata value of invalid UTF-8: refused, nothing written: %s", err.msg);
		attrmap_free(&m);
	}
	return tap_done();
}

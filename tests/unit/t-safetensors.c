/* Unit tests of lib/safetensors.c's parsers: header, config.json, index. */
#include <stdlib.h>
#include <string.h>

#include "../../lib/safetensors.h"
#include "tap.h"

static int parse(const char *json, uint64_t data_len, struct sw_err *err, size_t *n)
{
	struct st_entry *e = NULL;
	size_t count = 0;
	int rc = st_parse_header(json, strlen(json), data_len, &e, &count, err);
	free(e);
	if (n)
		*n = count;
	return rc;
}

int main(void)
{
	struct sw_err err;
	struct sw_config c;
	struct st_index_entry *idx;
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
	ok(st_parse_header("", 0, 0, &(struct st_entry *){0}, &n, &err) == SW_EDATA, "empty header");
	{
		/* a header that is not NUL-terminated must not be read past its length */
		char *buf = malloc(2);
		memcpy(buf, "{}", 2);
		struct st_entry *e = NULL;
		ok(st_parse_header(buf, 2, 0, &e, &n, &err) == SW_OK && n == 0, "header read by length, not NUL");
		free(e);
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
	const char *gpt2 = "{\"architectures\":[\"GPT2LMHeadModel\"],\"n_embd\":768}";
	ok(st_parse_config(gpt2, strlen(gpt2), &c, &err) == SW_EDATA && strstr(err.msg, "GPT2LMHeadModel"),
	   "non-Llama refused: %s", err.msg);
	const char *nolayers = "{\"model_type\":\"llama\",\"vocab_size\":10,\"hidden_size\":8,"
			       "\"intermediate_size\":16,\"num_attention_heads\":2}";
	ok(st_parse_config(nolayers, strlen(nolayers), &c, &err) == SW_EDATA &&
	   strstr(err.msg, "num_hidden_layers"), "missing field named: %s", err.msg);

	/* index */
	const char *index = "{\"metadata\":{\"total_size\":8},\"weight_map\":{\"a\":\"m-1.safetensors\","
			    "\"b\":\"m-2.safetensors\"}}";
	ok(st_parse_index(index, strlen(index), &idx, &n, &err) == SW_OK && n == 2 &&
	   !strcmp(idx[1].shard, "m-2.safetensors"), "index weight_map");
	free(idx);
	const char *escape = "{\"weight_map\":{\"a\":\"../../etc/passwd\"}}";
	ok(st_parse_index(escape, strlen(escape), &idx, &n, &err) == SW_EDATA, "shard paths outside the directory refused");
	return tap_done();
}

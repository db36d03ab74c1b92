/*
 * Unit tests of sw-convert's library (lib/formats/convert.c) and the safetensors
 * pieces it added (lib/formats/safetensors.c): HDF5 attribute <-> metadata key
 * mapping both ways, Hugging Face tensor names <-> roles and which roles
 * Llama has, the typed metadata values, BF16 rounding of known values as
 * the writer stores them, the __metadata__ map through a file, sizes.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../lib/base/arch.h"
#include "../../lib/formats/ckpt.h"
#include "../../lib/formats/convert.h"
#include "../../lib/base/dtype.h"
#include "../../lib/formats/safetensors.h"
#include "../../lib/formats/stwrite.h"
#include "tap.h"

static const struct sw_config cfg = {
	.arch = "llama", .vocab_size = 11, .d_model = 4, .n_layers = 3, .n_heads = 2,
	.n_kv_heads = 1, .head_dim = 2, .d_ff = 6, .seq_len = 8, .rope_theta = 1e4,
	.norm_eps = 1e-5, .tie_embeddings = 1, .multipliers = "none", .scale_vectors = 1,
};

static float f32_of(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static void test_keys(void)
{
	static const struct { const char *obj, *attr, *key; } cases[] = {
		{"/", "step", "scalewatch.step"},
		{"/config", "rope_theta", "scalewatch.config.rope_theta"},
		{"/optim", "block_ratio_emb", "scalewatch.optim.block_ratio_emb"},
		{"/params/model.layers.10.self_attn.q_proj.weight", "wd_mode",
		 "scalewatch.params.model.layers.10.self_attn.q_proj.weight.wd_mode"},
		{"/params/lm_head.weight", "lr", "scalewatch.params.lm_head.weight.lr"},
	};
	char key[512], obj[512], attr[64];

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		ok(attrmap_key(cases[i].obj, cases[i].attr, key, sizeof key) == 0 &&
		   !strcmp(key, cases[i].key), "key of %s %s: %s", cases[i].obj, cases[i].attr, key);
		ok(attrmap_parse_key(cases[i].key, obj, sizeof obj, attr, sizeof attr) == 0 &&
		   !strcmp(obj, cases[i].obj) && !strcmp(attr, cases[i].attr),
		   "and back: %s -> %s %s", cases[i].key, obj, attr);
	}
	ok(attrmap_parse_key("format", obj, sizeof obj, attr, sizeof attr) < 0 &&
	   attrmap_parse_key("scalewatch.", obj, sizeof obj, attr, sizeof attr) < 0 &&
	   attrmap_parse_key("scalewatch.params.lr", obj, sizeof obj, attr, sizeof attr) < 0 &&
	   attrmap_parse_key("scalewatch.config.a.b", obj, sizeof obj, attr, sizeof attr) < 0 &&
	   attrmap_parse_key("scalewatch.config.", obj, sizeof obj, attr, sizeof attr) < 0,
	   "not scalewatch keys: refused");
}

static void test_names(void)
{
	static const struct { const char *role; int layer; const char *hf; int llama; } cases[] = {
		{"embed", -1, "model.embed_tokens.weight", 1},
		{"q", 2, "model.layers.2.self_attn.q_proj.weight", 1},
		{"k", 0, "model.layers.0.self_attn.k_proj.weight", 1},
		{"v", 1, "model.layers.1.self_attn.v_proj.weight", 1},
		{"o", 1, "model.layers.1.self_attn.o_proj.weight", 1},
		{"attn_norm", 0, "model.layers.0.input_layernorm.weight", 1},
		{"ffn_norm", 0, "model.layers.0.post_attention_layernorm.weight", 1},
		{"gate", 2, "model.layers.2.mlp.gate_proj.weight", 1},
		{"up", 2, "model.layers.2.mlp.up_proj.weight", 1},
		{"down", 2, "model.layers.2.mlp.down_proj.weight", 1},
		{"final_norm", -1, "model.norm.weight", 1},
		{"lm_head", -1, "lm_head.weight", 1},
		{"q_mult", 0, "model.layers.0.self_attn.q_proj.multiplier", 0},
		{"lm_head_mult", -1, "lm_head.multiplier", 0},
		{"o_in_norm", 1, "model.layers.1.self_attn.o_in_norm.weight", 0},
		{"q_norm", 1, "model.layers.1.self_attn.q_norm.weight", 0},
		{"q_bias", 1, "model.layers.1.self_attn.q_proj.bias", 0},
	};
	char name[256];

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct sw_tensor_info t;
		memset(&t, 0, sizeof t);
		ok(arch_hf_name(cases[i].role, cases[i].layer, name, sizeof name) == 0 &&
		   !strcmp(name, cases[i].hf), "%s layer %d -> %s", cases[i].role, cases[i].layer, name);
		ok(arch_info_from_hf_name(&cfg, cases[i].hf, &t) == 0 &&
		   !strcmp(t.role, cases[i].role) && t.layer == cases[i].layer,
		   "%s -> %s layer %d", cases[i].hf, t.role, t.layer);
		ok(convert_hf_has_role("llama", cases[i].role) == cases[i].llama,
		   "Hugging Face Llama %s %s", cases[i].llama ? "has" : "has no", cases[i].role);
	}
	ok(convert_hf_has_role("qwen3", "q_norm") && convert_hf_has_role("qwen2", "k_bias") &&
	   !convert_hf_has_role("qwen3", "q_bias") && !convert_hf_has_role("mistral", "q_mult"),
	   "Qwen2 has biases, Qwen3 QK-norm, no one multipliers");
}

static void test_values(void)
{
	static const double reals[] = {0.1, 1e-5, 10000.0, -3.0, 1.0 / 3.0, 5e-324,
				       1.7976931348623157e308, 0.0};
	static const int64_t ints[] = {INT64_MIN, INT64_MAX, -1, 0, 1200, 4915200};
	static const char *const strs[] = {"llama", "coupled", "", "1", "-2", "1.5", "nan",
					   "inf", "'quoted", "1e5", " 3"};
	char buf[128];
	struct attr_value v, back;

	for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) {
		v = (struct attr_value){.type = ATTR_REAL, .d = reals[i]};
		attrmap_encode(&v, buf, sizeof buf);
		attrmap_decode(buf, &back);
		ok(back.type == ATTR_REAL && back.d == reals[i], "real %.17g as '%s', back exactly",
		   reals[i], buf);
	}
	v = (struct attr_value){.type = ATTR_REAL, .d = 10000.0};
	attrmap_encode(&v, buf, sizeof buf);
	ok(!strcmp(buf, "10000.0"), "a whole real keeps a point: %s", buf);
	v = (struct attr_value){.type = ATTR_REAL, .d = NAN};
	attrmap_encode(&v, buf, sizeof buf);
	attrmap_decode(buf, &back);
	ok(!strcmp(buf, "nan") && back.type == ATTR_REAL && isnan(back.d), "NaN");
	v = (struct attr_value){.type = ATTR_REAL, .d = -INFINITY};
	attrmap_encode(&v, buf, sizeof buf);
	attrmap_decode(buf, &back);
	ok(back.type == ATTR_REAL && back.d == -INFINITY, "-inf: '%s'", buf);
	for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
		v = (struct attr_value){.type = ATTR_INT, .i = ints[i]};
		attrmap_encode(&v, buf, sizeof buf);
		attrmap_decode(buf, &back);
		ok(back.type == ATTR_INT && back.i == ints[i], "integer %s", buf);
	}
	for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
		v = (struct attr_value){.type = ATTR_STR, .s = strs[i]};
		attrmap_encode(&v, buf, sizeof buf);
		attrmap_decode(buf, &back);
		ok(back.type == ATTR_STR && !strcmp(back.s, strs[i]), "string '%s' as '%s'", strs[i], buf);
	}
	v = (struct attr_value){.type = ATTR_STR, .s = "llama"};
	attrmap_encode(&v, buf, sizeof buf);
	ok(!strcmp(buf, "llama"), "a plain string stays plain");
	ok(attrmap_encode(&(struct attr_value){.type = ATTR_STR, .s = "abcdefgh"}, buf, 8) < 0,
	   "too long for the buffer: -1");
}

/* Round to nearest even, by the bits: the values the writer stores. */
static void test_bf16(const char *dir)
{
	static const struct { uint32_t f32; uint16_t bf16; const char *why; } cases[] = {
		{0x3F800000, 0x3F80, "1.0 exact"},
		{0x3F808000, 0x3F80, "1 + 2^-8: a tie, to even (down)"},
		{0x3F818000, 0x3F82, "a tie, to even (up)"},
		{0x3F808001, 0x3F81, "just above a tie: up"},
		{0x3F807FFF, 0x3F80, "just below a tie: down"},
		{0xBF80C000, 0xBF81, "negative: magnitude rounds"},
		{0x7F7FFFFF, 0x7F80, "the largest float rounds to inf"},
		{0x00000001, 0x0000, "the smallest subnormal rounds to 0"},
		{0x80000000, 0x8000, "-0 stays -0"},
		{0x7F800000, 0x7F80, "inf stays inf"},
	};
	enum { N = sizeof cases / sizeof cases[0] };
	struct sw_tensor_info t;
	struct stw *w;
	struct sw_err err;
	float in[N + 1];
	unsigned char file[4096];
	char path[512];
	FILE *f;
	size_t got;

	for (int i = 0; i < N; i++) {
		in[i] = f32_of(cases[i].f32);
		ok(sw_f32_to_bf16(in[i]) == cases[i].bf16, "bf16 %08x -> %04x: %s", cases[i].f32,
		   cases[i].bf16, cases[i].why);
	}
	in[N] = f32_of(0x7FC00001);
	ok(isnan(sw_bf16_to_f32(sw_f32_to_bf16(in[N]))), "NaN stays NaN");
	/* and so in the file */
	memset(&t, 0, sizeof t);
	arch_info_for_role(&cfg, "final_norm", -1, &t);
	t.rank = 1;
	t.shape[0] = t.numel = N;
	snprintf(path, sizeof path, "%s/b.safetensors", dir);
	ok(stw_create(path, &t, 1, SW_DTYPE_BF16, &w, &err) == SW_OK &&
	   stw_write(w, in, N, &err) == SW_OK && stw_commit(w, &err) == SW_OK, "bf16 file written");
	f = fopen(path, "rb");
	got = f ? fread(file, 1, sizeof file, f) : 0;
	if (f)
		fclose(f);
	if (got >= 2 * N + 8) {
		int same = 1;
		for (int i = 0; i < N; i++) {
			const unsigned char *p = file + got - 2 * N + 2 * i;
			same &= (uint16_t)(p[0] | p[1] << 8) == cases[i].bf16;
		}
		ok(same, "the file holds those bits, little-endian");
	} else {
		ok(0, "the file holds those bits (short file)");
	}
}

static void test_meta_file(const char *dir)
{
	struct sw_tensor_info t;
	struct attr_map m, back;
	const struct attr_map *got;
	struct stw *w;
	struct ckpt *ck = NULL;
	struct sw_err err;
	char path[512];
	float x[4] = {1, 2, 3, 4};
	int same;

	attrmap_init(&m);
	ok(attrmap_set(&m, "format", "pt", &err) == SW_OK &&
	   attrmap_set(&m, "scalewatch.step", "1200", &err) == SW_OK &&
	   attrmap_set(&m, "scalewatch.tokens", "99", &err) == SW_OK &&
	   attrmap_set(&m, "scalewatch.config.arch", "llama", &err) == SW_OK &&
	   attrmap_set(&m, "scalewatch.params.model.norm.weight.lr", "0.0025", &err) == SW_OK &&
	   attrmap_set(&m, "scalewatch.params.model.norm.weight.wd_mode", "none", &err) == SW_OK &&
	   attrmap_set(&m, "scalewatch.step", "1300", &err) == SW_OK && m.n == 6,
	   "map: six keys, a second set replaces");
	ok(!strcmp(attrmap_get(&m, "scalewatch.step"), "1300") && !attrmap_get(&m, "nope"),
	   "get: the last value; NULL when absent");
	memset(&t, 0, sizeof t);
	arch_info_for_role(&cfg, "final_norm", -1, &t);
	t.rank = 1;
	t.shape[0] = t.numel = 4;
	snprintf(path, sizeof path, "%s/config.json", dir);
	ok(st_write_config(path, &cfg, "float32", &err) == SW_OK, "config.json");
	snprintf(path, sizeof path, "%s/m.safetensors", dir);
	ok(stw_create_meta(path, &t, 1, SW_DTYPE_F32, &m, &w, &err) == SW_OK &&
	   stw_write(w, x, 4, &err) == SW_OK && stw_commit(w, &err) == SW_OK,
	   "safetensors with __metadata__ written");
	ok(ckpt_open(path, &ck, &err) == SW_OK, "and read: %s", ck ? "ok" : err.msg);
	if (!ck)
		return;
	attrmap_init(&back);
	if (ckpt_attrs(ck, &got, &err) == SW_OK)
		for (size_t i = 0; i < got->n; i++)
			attrmap_set(&back, got->kv[i].key, got->kv[i].value, &err);
	same = back.n == m.n;
	for (size_t i = 0; same && i < m.n; i++)
		same = attrmap_get(&back, m.kv[i].key) &&
		       !strcmp(attrmap_get(&back, m.kv[i].key), m.kv[i].value);
	ok(same, "every key and value back (%zu)", back.n);
	ok(ckpt_meta(ck)->has_step && ckpt_meta(ck)->step == 1300 && ckpt_meta(ck)->tokens == 99,
	   "step and tokens from the metadata");
	ok(ckpt_info(ck, 0)->lr == 0.0025 && isnan(ckpt_info(ck, 0)->wd) &&
	   ckpt_info(ck, 0)->wd_mode == SW_WD_NONE, "lr and wd_mode from the metadata, wd unknown");
	ckpt_close(ck);
	attrmap_free(&back);
	/* a metadata value of the wrong type is bad data */
	attrmap_set(&m, "scalewatch.step", "soon", &err);
	ok(stw_create_meta(path, &t, 1, SW_DTYPE_F32, &m, &w, &err) == SW_OK &&
	   stw_write(w, x, 4, &err) == SW_OK && stw_commit(w, &err) == SW_OK &&
	   ckpt_open(path, &ck, &err) == SW_EDATA && strstr(err.msg, "scalewatch.step"),
	   "step 'soon': refused (%s)", err.msg);
	attrmap_free(&m);
	ok(st_parse_header("{\"__metadata__\":{\"a\":1}}", 23, 0, &m, &(struct st_header){0},
			   &err) == SW_EDATA, "a number in __metadata__: refused");
	attrmap_free(&m);
}

static void test_sizes(void)
{
	static const struct { const char *s; uint64_t v; } good[] = {
		{"4096", 4096}, {"10MB", 10000000}, {"10mb", 10000000}, {"2GiB", 2147483648ULL},
		{"1.5GB", 1500000000ULL}, {"5KiB", 5120}, {"7B", 7},
	};
	static const char *const bad[] = {"", "MB", "-1MB", "0", "10XB", "1e30GB", " 5MB"};
	uint64_t v;

	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
		ok(convert_parse_size(good[i].s, &v) == 0 && v == good[i].v, "size %s = %llu",
		   good[i].s, (unsigned long long)v);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ok(convert_parse_size(bad[i], &v) < 0, "size '%s': refused", bad[i]);
}

int main(void)
{
	char dir[] = "/tmp/sw-t-convert.XXXXXX", cmd[64];

	if (!mkdtemp(dir))
		return 1;
	test_keys();
	test_names();
	test_values();
	test_bf16(dir);
	test_meta_file(dir);
	test_sizes();
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		return 1;
	return tap_done();
}

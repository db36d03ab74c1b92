/*
 * sw-tokenize - a byte-level BPE tokenizer: train one on a corpus, encode
 * text into llm.c token files for sw-train, decode them back, describe a
 * tokenizer. The algorithms are lib/files/bpe.c and lib/files/bpe_train.c, the token
 * files lib/files/tokfile.c; this reads the inputs in blocks and prints.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/base/atomicfile.h"
#include "../lib/files/bpe.h"
#include "../lib/base/grow.h"
#include "../lib/files/tokfile.h"
#include "common.h"

static const char usage[] =
	"sw-tokenize train [--force] [--json] [--vocab N]\n"
	"                  [--pretokenize words|none] -o TOKENIZER [--log | --quiet]\n"
	"                  [FILE ...]\n"
	"       sw-tokenize encode [--force] [--json] -t TOKENIZER -o TOKENS\n"
	"                  [--log | --quiet] [FILE ...]\n"
	"       sw-tokenize decode -t TOKENIZER [--force] [-o FILE] [TOKENS ...]\n"
	"       sw-tokenize info [--json] [--tokens] [TOKENIZER ...]";
static const char help[] =
	"A byte-level BPE tokenizer.\n"
	"  train    learn merges from the text of FILEs; write the tokenizer file;\n"
	"           print file vocab merges bytes tokens bytes_per_token\n"
	"  encode   write the text of FILEs as one llm.c token file (what sw-train\n"
	"           --data reads); print file bytes tokens bytes_per_token per FILE\n"
	"  decode   the bytes of llm.c token files, to stdout or -o FILE\n"
	"  info     file vocab merges pretokenizer longest per tokenizer; --tokens:\n"
	"           file id left right length bytes per token (bytes escaped)\n"
	"\n"
	"  --force                replace an existing -o FILE (never an input)\n"
	"  -o, --output FILE      written under a temporary name, then renamed\n"
	"  -t, --tokenizer FILE   the tokenizer file train wrote\n"
	"  --vocab N              vocabulary size, 257..65536 (2048)\n"
	"  --pretokenize P        words: merges stay within words (default); none\n"
	"  --tokens               info: one row per token\n"
	"  --json                 JSON Lines instead of TSV (train, encode, info)\n"
	TOOL_LOG_HELP
	"  --help, --version\n"
	"\n"
	"With no FILE, or FILE '-', train, encode and decode read standard input;\n"
	"info reads tokenizer names from it, one per line. See sw-tokenize(1).\n";

enum { O_VOCAB = OPT_TOOL_FIRST, O_PRETOK, O_TOKENS };

enum cmd { CMD_TRAIN, CMD_ENCODE, CMD_DECODE, CMD_INFO };

struct opts {
	enum cmd cmd;
	const char *output, *tokenizer;
	int vocab, vocab_set, pretok, pretok_set, tokens;
};

#define BLOCK (1u << 20)

/* ---- reading inputs ---- */

static int open_input(const char *name, int *fd, struct sw_err *err)
{
	if (!strcmp(name, "-")) {
		*fd = STDIN_FILENO;
		return SW_OK;
	}
	if ((*fd = open(name, O_RDONLY | O_CLOEXEC)) < 0)
		return sw_fail(err, sw_errno_status(errno), "%s", strerror(errno));
	return SW_OK;
}

static void close_input(int fd)
{
	if (fd != STDIN_FILENO)
		close(fd);
}

/* read(2) into buf[*len, cap), retrying EINTR; the count, or -1 (err set). */
static ssize_t read_some(int fd, unsigned char *buf, size_t cap, size_t len, struct sw_err *err)
{
	ssize_t r;

	do
		r = read(fd, buf + len, cap - len);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		sw_fail(err, sw_errno_status(errno), "read: %s", strerror(errno));
	return r;
}

typedef int (*feed_fn)(void *ctx, const unsigned char *buf, size_t len, int final,
		       size_t *consumed, struct sw_err *err);

/*
 * Pass one input to fn block by block; what fn leaves (a piece that the
 * next block may extend) comes back at the front of the next call.
 */
static int feed_input(struct tool *tl, const char *name, feed_fn fn, void *ctx,
		      uint64_t *bytes, struct sw_err *err)
{
	unsigned char *buf = NULL;
	size_t cap = 0, len = 0;
	int fd, rc, final = 0;

	*bytes = 0;
	if ((rc = open_input(name, &fd, err)))
		return rc;
	while (!final) {
		size_t consumed;
		ssize_t r;
		/* geometric: a long piece may pile up */
		if (SW_GROW(buf, &cap, len + BLOCK) < 0) {
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			break;
		}
		if ((r = read_some(fd, buf, cap, len, err)) < 0) {
			rc = err->code;
			break;
		}
		final = r == 0;
		len += (size_t)r;
		*bytes += (uint64_t)r;
		if ((rc = fn(ctx, buf, len, final, &consumed, err)))
			break;
		if (consumed > 0) {
			memmove(buf, buf + consumed, len - consumed);
			len -= consumed;
		}
		tool_progress(tl, "%s: %.0f MB", name, (double)*bytes / 1e6);
	}
	free(buf);
	close_input(fd);
	return rc;
}

/* The whole of one input in memory. */
static int slurp(const char *name, unsigned char **out, size_t *out_len, struct sw_err *err)
{
	unsigned char *buf = NULL;
	size_t cap = 0, len = 0;
	int fd, rc;

	*out = NULL;
	*out_len = 0;
	if ((rc = open_input(name, &fd, err)))
		return rc;
	for (;;) {
		ssize_t r;
		if (len == cap && SW_GROW(buf, &cap, len + BLOCK) < 0) {
			rc = sw_fail(err, SW_ESOFTWARE, "out of memory");
			break;
		}
		if ((r = read_some(fd, buf, cap, len, err)) < 0) {
			rc = err->code;
			break;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	close_input(fd);
	if (rc) {
		free(buf);
		return rc;
	}
	*out = buf;
	*out_len = len;
	return SW_OK;
}

/* Report, finish, exit: for the commands that stop at the first error. */
static int fail(struct tool *tl, const char *file, const struct sw_err *err)
{
	tool_error(tl, file, err);
	return tool_finish(tl);
}

/* The bytes_per_token cell: empty (null in JSON) for no token, the
 * unknown value, not 0. */
static void bytes_per_token(struct table *tb, uint64_t bytes, uint64_t tokens)
{
	if (tokens)
		table_num(tb, (double)bytes / (double)tokens);
	else
		table_empty(tb);
}

/* ---- train ---- */

static int train_feed(void *ctx, const unsigned char *buf, size_t len, int final,
		      size_t *consumed, struct sw_err *err)
{
	return bpe_trainer_feed(ctx, buf, len, final, consumed, err);
}

static void train_progress(void *ctx, int done, int wanted)
{
	tool_progress(ctx, "merge %d of %d", done, wanted);
}

static int cmd_train(struct tool *tl, const struct opts *o)
{
	static const char *const cols[] = {"file", "vocab", "merges", "bytes", "tokens",
					   "bytes_per_token"};
	char tmp[PATH_MAX + 64];
	struct bpe_trainer *tr;
	struct bpe_train_stats st;
	struct bpe *b = NULL;
	struct sw_err err;
	struct table tb;
	const char *file = NULL;
	int rc, fd;

	/* the output first: no training to learn it cannot be written */
	if ((rc = atomic_create(o->output, tmp, sizeof tmp, &fd, &err)))
		return fail(tl, NULL, &err);
	if ((rc = bpe_trainer_new((enum bpe_pretok)o->pretok, &tr, &err)))
		goto abort_output;
	while ((file = tool_next_file(tl))) {
		uint64_t bytes;
		if ((rc = feed_input(tl, file, train_feed, tr, &bytes, &err)))
			break;
	}
	if (!rc) {
		rc = bpe_trainer_run(tr, o->vocab, train_progress, tl, &b, &st, &err);
		tool_progress_done(tl);
	}
	bpe_trainer_free(tr);
	if (rc)
		goto abort_output;
	if (st.vocab < o->vocab)
		fprintf(stderr, "%s: %s: stopped at a vocabulary of %d, not %d: %s\n", tl->prog,
			o->output, st.vocab, o->vocab,
			st.stop == BPE_STOP_NO_PAIR ? "no pair occurs twice in the corpus"
						    : "the tokens' bytes reached the limit");
	rc = atomic_finish(fd, tmp, o->output, bpe_write_fd(b, fd, o->output, &err), &err);
	bpe_free(b);
	if (rc)
		return fail(tl, NULL, &err);
	table_init(&tb, stdout, tl->fmt, cols, 6);
	table_str(&tb, o->output);
	table_int(&tb, st.vocab);
	table_int(&tb, st.vocab - 256);
	table_int(&tb, (int64_t)st.bytes);
	table_int(&tb, (int64_t)st.tokens);
	bytes_per_token(&tb, st.bytes, st.tokens);
	table_end_row(&tb);
	return tool_finish(tl);
abort_output:
	close(fd);
	atomic_discard(tmp);
	return fail(tl, file, &err);
}

/* ---- encode ---- */

struct encoding {
	struct bpe_encoder *enc;
	struct bpe_tokens tok;          /* encoded, not yet written */
	struct tokfile_writer w;
	uint64_t tokens;                /* of the current input */
};

static int encode_feed(void *ctx, const unsigned char *buf, size_t len, int final,
		       size_t *consumed, struct sw_err *err)
{
	struct encoding *e = ctx;
	int rc;

	if ((rc = bpe_encode(e->enc, buf, len, final, consumed, &e->tok, err)))
		return rc;
	e->tokens += e->tok.n;
	rc = tokfile_append(&e->w, e->tok.id, e->tok.n, err);
	e->tok.n = 0;
	return rc;
}

static int cmd_encode(struct tool *tl, const struct opts *o)
{
	static const char *const cols[] = {"file", "bytes", "tokens", "bytes_per_token"};
	struct encoding e = {0};
	struct {
		char *name;
		uint64_t bytes, tokens;
	} *row = NULL;
	size_t nrow = 0, rowcap = 0;
	struct bpe *b;
	struct sw_err err;
	struct table tb;
	const char *file;
	int rc;

	if ((rc = bpe_load(o->tokenizer, &b, &err)))
		return fail(tl, o->tokenizer, &err);
	if ((rc = bpe_encoder_new(b, &e.enc, &err)) || (rc = tokfile_create(&e.w, o->output, &err))) {
		file = NULL;
		goto out;
	}
	while ((file = tool_next_file(tl))) {
		uint64_t bytes;
		if (SW_GROW(row, &rowcap, nrow + 1) < 0) {
			rc = sw_fail(&err, SW_ESOFTWARE, "out of memory");
			break;
		}
		e.tokens = 0;
		if ((rc = feed_input(tl, file, encode_feed, &e, &bytes, &err)))
			break;
		if (!(row[nrow].name = strdup(file))) {
			rc = sw_fail(&err, SW_ESOFTWARE, "out of memory");
			break;
		}
		row[nrow].bytes = bytes;
		row[nrow++].tokens = e.tokens;
	}
	/* a failed input leaves no output: a partial file passed off as whole
	 * is worse than none */
	if (rc)
		tokfile_abort(&e.w);
	else if ((rc = tokfile_commit(&e.w, &err)))
		file = NULL;
out:
	tool_progress_done(tl);
	if (rc)
		tool_error(tl, file, &err);
	table_init(&tb, stdout, tl->fmt, cols, 4);
	for (size_t i = 0; i < nrow; i++) {
		if (!rc) {
			table_str(&tb, row[i].name);
			table_int(&tb, (int64_t)row[i].bytes);
			table_int(&tb, (int64_t)row[i].tokens);
			bytes_per_token(&tb, row[i].bytes, row[i].tokens);
			table_end_row(&tb);
		}
		free(row[i].name);
	}
	free(row);
	bpe_tokens_free(&e.tok);
	bpe_encoder_free(e.enc);
	bpe_free(b);
	return tool_finish(tl);
}

/* ---- decode ---- */

struct sink {
	const char *name;       /* for messages */
	int fd;                 /* -o: the temporary file; else -1 (stdout) */
};

static int sink_write(void *ctx, const void *p, size_t n, struct sw_err *err)
{
	struct sink *s = ctx;

	if (s->fd >= 0)
		return atomic_write_all(s->fd, p, n, s->name, err);
	if (fwrite(p, 1, n, stdout) != n)
		return sw_fail(err, SW_EIO, "write: %s", strerror(errno));
	return SW_OK;
}

/* Decode one token file into s, streamed: memory holds the token file and
 * a constant, however many bytes its tokens expand to; nothing of a file
 * whose ids do not all fit the vocabulary. */
static int decode_file(const struct bpe *b, const char *file, struct sink *s, struct sw_err *err)
{
	unsigned char *buf;
	const uint16_t *id;
	size_t len, n;
	int rc;

	if ((rc = slurp(file, &buf, &len, err)))
		return rc;
	if (!(rc = tokfile_parse(buf, len, &id, &n, err))) {
		for (size_t i = 0; i < n; i++)
			if (id[i] >= bpe_vocab(b)) {
				rc = sw_fail(err, SW_EDATA, "token %zu: id %u is not below the vocabulary size %d",
					     i, id[i], bpe_vocab(b));
				break;
			}
		if (!rc)
			rc = bpe_decode_stream(b, id, n, sink_write, s, err);
	}
	free(buf);
	return rc;
}

static int cmd_decode(struct tool *tl, const struct opts *o)
{
	char tmp[PATH_MAX + 64];
	struct sink s = {o->output, -1};
	struct bpe *b;
	struct sw_err err;
	const char *file;
	int rc;

	if ((rc = bpe_load(o->tokenizer, &b, &err)))
		return fail(tl, o->tokenizer, &err);
	if (o->output && (rc = atomic_create(o->output, tmp, sizeof tmp, &s.fd, &err))) {
		bpe_free(b);
		return fail(tl, NULL, &err);
	}
	while ((file = tool_next_file(tl)) && !tool_stdout_broken(tl)) {
		if ((rc = decode_file(b, file, &s, &err))) {
			tool_error(tl, file, &err);
			if (s.fd >= 0)          /* -o: no partial output */
				break;
		}
	}
	bpe_free(b);
	if (s.fd >= 0 && atomic_finish(s.fd, tmp, o->output, tl->status, &err) && !tl->status)
		tool_error(tl, NULL, &err);
	return tool_finish(tl);
}

/* ---- info ---- */

/* A token's bytes as ASCII, built a chunk at a time: printable characters
 * as they are, \\, \t, \n, \r, and \xHH for every other byte. */
struct escaped {
	char *s;
	size_t n, cap;
};

static int escape_chunk(void *ctx, const void *bytes, size_t n, struct sw_err *err)
{
	static const char hex[] = "0123456789abcdef";
	struct escaped *e = ctx;
	const unsigned char *p = bytes;
	char *out;

	if (SW_GROW(e->s, &e->cap, e->n + 4 * n + 1) < 0)
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	out = e->s + e->n;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = p[i];
		if (c == '\\' || c == '\t' || c == '\n' || c == '\r') {
			*out++ = '\\';
			*out++ = c == '\\' ? '\\' : c == '\t' ? 't' : c == '\n' ? 'n' : 'r';
		} else if (c >= 0x20 && c < 0x7f) {
			*out++ = (char)c;
		} else {
			*out++ = '\\';
			*out++ = 'x';
			*out++ = hex[c >> 4];
			*out++ = hex[c & 15];
		}
	}
	*out = '\0';
	e->n = (size_t)(out - e->s);
	return SW_OK;
}

static int info_tokens(struct tool *tl, const char *file, const struct bpe *b, struct sw_err *err)
{
	static const char *const cols[] = {"file", "id", "left", "right", "length", "bytes"};
	struct table tb;
	struct escaped esc = {0};
	int rc = SW_OK;

	table_init(&tb, stdout, tl->fmt, cols, 6);
	if (tl->fmt == TABLE_TSV)
		table_header(&tb);
	for (int id = 0; id < bpe_vocab(b) && !tool_stdout_broken(tl); id++) {
		size_t len = bpe_token_len(b, id);
		uint16_t tid = (uint16_t)id;
		esc.n = 0;
		if ((rc = escape_chunk(&esc, "", 0, err)) ||
		    (rc = bpe_decode_stream(b, &tid, 1, escape_chunk, &esc, err)))
			break;
		if (tl->fmt == TABLE_TSV) {
			/* not through table_str: it would escape our backslashes again */
			if (id < 256)
				printf("%s\t%d\t\t\t%zu\t%s\n", file, id, len, esc.s);
			else
				printf("%s\t%d\t%u\t%u\t%zu\t%s\n", file, id, bpe_merge_at(b, id - 256).left,
				       bpe_merge_at(b, id - 256).right, len, esc.s);
			continue;
		}
		table_str(&tb, file);
		table_int(&tb, id);
		if (id < 256) {
			table_empty(&tb);
			table_empty(&tb);
		} else {
			table_int(&tb, bpe_merge_at(b, id - 256).left);
			table_int(&tb, bpe_merge_at(b, id - 256).right);
		}
		table_int(&tb, (int64_t)len);
		table_str(&tb, esc.s);
		table_end_row(&tb);
	}
	free(esc.s);
	return rc;
}

static int cmd_info(struct tool *tl, const struct opts *o)
{
	static const char *const cols[] = {"file", "vocab", "merges", "pretokenizer", "longest"};
	struct table tb;
	const char *file;

	table_init(&tb, stdout, tl->fmt, cols, 5);
	if (!o->tokens)
		table_header(&tb);
	while ((file = tool_next_file(tl)) && !tool_stdout_broken(tl)) {
		struct bpe *b;
		struct sw_err err;
		size_t longest = 0;

		if (bpe_load(file, &b, &err)) {
			tool_error(tl, file, &err);
			continue;
		}
		if (o->tokens) {
			if (info_tokens(tl, file, b, &err))
				tool_error(tl, file, &err);
		} else {
			for (int id = 0; id < bpe_vocab(b); id++)
				longest = bpe_token_len(b, id) > longest ? bpe_token_len(b, id) : longest;
			table_str(&tb, file);
			table_int(&tb, bpe_vocab(b));
			table_int(&tb, bpe_vocab(b) - 256);
			table_str(&tb, bpe_pretok_name(bpe_pretokenizer(b)));
			table_int(&tb, (int64_t)longest);
			table_end_row(&tb);
		}
		bpe_free(b);
	}
	return tool_finish(tl);
}

/* ---- main ---- */

/* -o is none of the inputs (the FILEs or stdin, the tokenizer) and, unless
 * --force, no file there: refused before any work (tool_check_output). */
static int check_output(struct tool *tl, const struct opts *o)
{
	size_t n = 0;
	const char **in = malloc(((size_t)(tl->argc - tl->argi) + 1) * sizeof *in);
	struct sw_err err;
	int rc;

	if (!in) {
		sw_fail(&err, SW_ESOFTWARE, "out of memory");
		tool_error(tl, NULL, &err);
		return SW_ESOFTWARE;
	}
	if (o->tokenizer)
		in[n++] = o->tokenizer;
	for (int i = tl->argi; i < tl->argc; i++)
		in[n++] = tl->argv[i];
	rc = tool_check_output(tl, o->output, in, n);
	free(in);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		TOOL_LOG_OPTION,
		{"help", no_argument, NULL, OPT_HELP},
		{"version", no_argument, NULL, OPT_VERSION},
		{"json", no_argument, NULL, OPT_JSON},
		{"output", required_argument, NULL, 'o'},
		{"tokenizer", required_argument, NULL, 't'},
		{"vocab", required_argument, NULL, O_VOCAB},
		{"pretokenize", required_argument, NULL, O_PRETOK},
		{"tokens", no_argument, NULL, O_TOKENS},
		TOOL_FORCE_OPTION,
		{NULL, 0, NULL, 0}
	};
	static const char *const names[] = {"train", "encode", "decode", "info"};
	struct opts o = {.vocab = 2048, .pretok = BPE_PRETOK_WORDS};
	struct tool tl;
	int opt, i, json = 0;

	tool_init(&tl, "sw-tokenize", usage, help, argc, argv);
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "--version")))
		tool_common_option(&tl, argv[1][2] == 'h' ? OPT_HELP : OPT_VERSION, NULL);
	if (argc < 2)
		tool_usage_error(&tl, "no command: train, encode, decode or info");
	for (i = 0; i < 4 && strcmp(argv[1], names[i]); i++)
		;
	if (i == 4)
		tool_usage_error(&tl, "unknown command '%s': train, encode, decode or info", argv[1]);
	o.cmd = (enum cmd)i;
	tl.argv = argv + 1;     /* getopt's view, for the message of a bad option */
	tl.argc = argc - 1;
	while ((opt = getopt_long(argc - 1, argv + 1, "o:t:", longopts, NULL)) != -1) {
		switch (opt) {
		case 'o': o.output = optarg; break;
		case 't': o.tokenizer = optarg; break;
		case O_VOCAB:
			o.vocab = (int)tool_parse_int(&tl, "--vocab", optarg, BPE_MIN_VOCAB + 1, BPE_MAX_VOCAB);
			o.vocab_set = 1;
			break;
		case O_PRETOK:
			if ((o.pretok = bpe_pretok_parse(optarg)) < 0)
				tool_usage_error(&tl, "--pretokenize: '%s' is not words or none", optarg);
			o.pretok_set = 1;
			break;
		case O_TOKENS: o.tokens = 1; break;
		case OPT_JSON: json = 1; /* FALLTHROUGH */
		default: tool_common_option(&tl, opt, optarg); break;
		}
	}
	tl.argv = argv;
	tl.argc = argc;
	if ((o.vocab_set || o.pretok_set) && o.cmd != CMD_TRAIN)
		tool_usage_error(&tl, "--vocab and --pretokenize are options of train");
	if (json && o.cmd == CMD_DECODE)
		tool_usage_error(&tl, "decode writes bytes: --json is an option of train, encode and info");
	if (o.tokens && o.cmd != CMD_INFO)
		tool_usage_error(&tl, "--tokens is an option of info");
	if (o.tokenizer && (o.cmd == CMD_TRAIN || o.cmd == CMD_INFO))
		tool_usage_error(&tl, "-t is an option of encode and decode");
	if (!o.tokenizer && (o.cmd == CMD_ENCODE || o.cmd == CMD_DECODE))
		tool_usage_error(&tl, "%s needs -t TOKENIZER", names[o.cmd]);
	if (o.output && o.cmd == CMD_INFO)
		tool_usage_error(&tl, "info writes to standard output");
	if (!o.output && (o.cmd == CMD_TRAIN || o.cmd == CMD_ENCODE))
		tool_usage_error(&tl, "%s needs -o FILE", names[o.cmd]);
	if (tl.force && !o.output)
		tool_usage_error(&tl, "--force goes with -o FILE");
	if (o.cmd == CMD_INFO) {
		tool_files_begin(&tl, optind + 1);
	} else if (optind + 1 >= argc) {
		/* no FILE: the data itself comes on stdin */
		static char *dash[] = {"-"};
		if (isatty(STDIN_FILENO))
			tool_usage_error(&tl, "no FILE given (the input is read from stdin when it is not a terminal)");
		tl.argv = dash;
		tl.argc = 1;
		tl.argi = 0;
	} else {
		tl.argi = optind + 1;
	}
	if (o.output && check_output(&tl, &o))
		return tool_finish(&tl);
	switch (o.cmd) {
	case CMD_TRAIN: return cmd_train(&tl, &o);
	case CMD_ENCODE: return cmd_encode(&tl, &o);
	case CMD_DECODE: return cmd_decode(&tl, &o);
	default: return cmd_info(&tl, &o);
	}
}

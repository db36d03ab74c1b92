/* Unit tests of lib/base/jsonstrict.c: JSON as serde_json and Python's json
 * read it (RFC 8259), or refused; UTF-8 sequences. */
#include <stdlib.h>
#include <string.h>

#include "../../lib/base/jsonstrict.h"
#include "tap.h"

/* rc of parsing s (strlen bytes); the message in err */
static int parse(const char *s, struct sw_err *err)
{
	cJSON *j = NULL;
	int rc = jsonstrict_parse(s, strlen(s), "doc", &j, err);

	if ((rc == SW_OK) != (j != NULL))
		return -1;
	cJSON_Delete(j);
	return rc;
}

static int refused_for(const char *s, const char *why)
{
	struct sw_err err = {0};

	return parse(s, &err) == SW_EDATA && strstr(err.msg, why) != NULL;
}

int main(void)
{
	struct sw_err err;
	static const struct { const char *doc, *title; } good[] = {
		{"{}", "empty object"},
		{" \t\r\n{\"a\": [1, -0, 0.5, 1e3, -2E-7, true, false, null, \"x\"]} \n\t\r ",
		 "every kind of value, blanks around"},
		{"{\"\\u00e9\\ud83d\\ude00\\\"\\\\\\/\\b\\f\\n\\r\\t\":1}", "every escape, a surrogate pair"},
		{"{\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\":\"\xf4\x8f\xbf\xbf\"}", "UTF-8 of 2, 3 and 4 bytes, U+10FFFF"},
		{"{\"a\":{\"x\":1},\"b\":{\"x\":2}}", "one key in two objects"},
		{"[[[[1]]]]", "arrays"},
	};
	static const struct { const char *doc, *why, *title; } bad[] = {
		{"{}}garbage", "bytes after the JSON value", "trailing garbage"},
		{"{} {}", "bytes after the JSON value", "two values"},
		{"\x01{}", "unexpected byte", "a control byte as blank (cJSON takes it)"},
		{"{}\x0b", "bytes after the JSON value", "a vertical tab after (cJSON takes it)"},
		{"{\"a\":\"x\ty\"}", "control byte inside a string", "a raw tab in a string"},
		{"{\"a\\u0000b\":1}", "escaped NUL", "an escaped NUL"},
		{"{\"\\ud800\":1}", "unpaired surrogate", "a lone high surrogate"},
		{"{\"\\udc00\":1}", "unpaired surrogate", "a lone low surrogate"},
		{"{\"\\ud800\\u0041\":1}", "unpaired surrogate", "a high surrogate and no low one"},
		{"{\"\\x\":1}", "unknown escape", "an unknown escape"},
		{"{\"\\u12g4\":1}", "4 hex digits", "a bad \\u escape"},
		{"{\"a\":01}", "missing ','", "a leading zero"},
		{"{\"a\":1.}", "malformed number", "1."},
		{"{\"a\":.5}", "unexpected byte", ".5"},
		{"{\"a\":+1}", "unexpected byte", "+1"},
		{"{\"a\":1e}", "malformed number", "1e"},
		{"{\"a\":-}", "malformed number", "-"},
		{"{\"a\":NaN}", "unexpected byte", "NaN"},
		{"{\"a\":Infinity}", "unexpected byte", "Infinity"},
		{"{\"a\":tru}", "unexpected byte", "a cut literal"},
		{"{\"a\":1,}", "key that is not a string", "a trailing comma in an object"},
		{"[1,]", "unexpected byte", "a trailing comma in an array"},
		{"{a:1}", "key that is not a string", "a bare key"},
		{"{\"a\" 1}", "without ':'", "no colon"},
		{"{\"a\":1 \"b\":2}", "missing ','", "no comma"},
		{"{\"a\":1", "cut document", "a cut object"},
		{"{\"a", "unterminated string", "a cut string"},
		{"", "cut document", "nothing"},
		{"\xef\xbb\xbf{}", "unexpected byte", "a byte order mark"},
		{"{\"\xff\":1}", "invalid UTF-8", "0xff"},
		{"{\"\xc0\xaf\":1}", "invalid UTF-8", "an overlong '/'"},
		{"{\"\xe0\x80\xaf\":1}", "invalid UTF-8", "an overlong 3-byte form"},
		{"{\"\xed\xa0\x80\":1}", "invalid UTF-8", "an encoded surrogate"},
		{"{\"\xf4\x90\x80\x80\":1}", "invalid UTF-8", "past U+10FFFF"},
		{"{\"\xe2\x82\":1}", "invalid UTF-8", "a cut sequence"},
		{"{\"a\":1,\"a\":2}", "key 'a' appears twice", "a key twice"},
		{"{\"a\":1,\"\\u0061\":2}", "key 'a' appears twice", "a key twice, once escaped"},
		{"{\"x\":[{\"b\":1,\"c\":2,\"b\":3}]}", "key 'b' appears twice", "a key twice, deep down"},
	};
	char *deep;
	int n;

	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
		ok(parse(good[i].doc, &err) == SW_OK, "taken: %s", good[i].title);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int r = refused_for(bad[i].doc, bad[i].why);
		ok(r, "refused: %s ('%s')", bad[i].title, bad[i].why);
	}
	ok(parse("{}}x", &err) == SW_EDATA && !strcmp(err.msg, "doc is not valid JSON (byte 2: bytes after the JSON value)"),
	   "the message names the document and the byte: %s", err.msg);
	{
		/* read by length: the byte after the buffer is never looked at */
		char *buf = malloc(2);
		cJSON *j;
		memcpy(buf, "{}", 2);
		ok(jsonstrict_parse(buf, 2, "doc", &j, &err) == SW_OK && cJSON_IsObject(j), "read by length");
		cJSON_Delete(j);
		free(buf);
	}
	/* nesting: JSONSTRICT_MAX_DEPTH levels taken, one more refused */
	deep = malloc(2 * JSONSTRICT_MAX_DEPTH + 3);
	for (n = JSONSTRICT_MAX_DEPTH; n <= JSONSTRICT_MAX_DEPTH + 1; n++) {
		memset(deep, '[', (size_t)n);
		memset(deep + n, ']', (size_t)n);
		deep[2 * n] = '\0';
		if (n == JSONSTRICT_MAX_DEPTH)
			ok(parse(deep, &err) == SW_OK, "%d levels taken", n);
		else
			ok(refused_for(deep, "nesting deeper"), "%d levels refused", n);
	}
	free(deep);

	{
		/* objects of more than 8 keys are checked through a hash index:
		 * a key twice among 2000 is found wherever it is, escaped or
		 * not, and 2000 distinct keys (one object inside another) pass */
		size_t cap = 64 * 2000 + 64, len;
		char *doc = malloc(cap);
		len = (size_t)sprintf(doc, "{\"inner\":{");
		for (int i = 0; i < 2000; i++)
			len += (size_t)sprintf(doc + len, "%s\"k%d\":%d", i ? "," : "", i, i);
		strcpy(doc + len, "},\"k1\":1}");
		ok(parse(doc, &err) == SW_OK, "2000 keys in an object, one of them again outside it");
		strcpy(doc + len, ",\"k\\u0031999\":0}}");
		ok(parse(doc, &err) == SW_EDATA && strstr(err.msg, "key 'k1999' appears twice"),
		   "a key twice among 2001, the second escaped: %s", err.msg);
		free(doc);
	}
	{
		/* the cursor over a checked document: strings decoded as the
		 * reference readers decode them, values passed whole */
		const char *doc = "{\"caf\\u00e9\\ud83d\\ude00\\n\\\"x\\/\" : [1, {\"a\": \"]\"}] , \"z\":2}";
		const char *end = doc + strlen(doc), *p;
		char out[64];
		ok(jsonstrict_check(doc, strlen(doc), "doc", &err) == SW_OK, "the cursor's document checks");
		p = jsonstrict_string(jsonstrict_ws(doc + 1, end), end, out);
		ok(!strcmp(out, "caf\xc3\xa9\xf0\x9f\x98\x80\n\"x/") && *p == ' ',
		   "escapes decoded to UTF-8 (a surrogate pair to 4 bytes)");
		p = jsonstrict_ws(jsonstrict_ws(p, end) + 1, end);
		p = jsonstrict_skip(p, end);
		ok(*p == ' ' && p[1] == ',', "a value skipped whole, a bracket inside a string too");
	}

	ok(jsonstrict_utf8_len((const unsigned char *)"a", 1) == 1, "ASCII: 1 byte");
	ok(jsonstrict_utf8_len((const unsigned char *)"\xc3\xa9", 2) == 2, "U+00E9: 2 bytes");
	ok(jsonstrict_utf8_len((const unsigned char *)"\xc3\xa9", 1) == 0, "a sequence cut by avail");
	ok(jsonstrict_utf8_len((const unsigned char *)"\xef\xbf\xbf", 3) == 3, "U+FFFF: 3 bytes");
	ok(jsonstrict_utf8_len((const unsigned char *)"\xf0\x9f\x98\x80", 4) == 4, "U+1F600: 4 bytes");
	ok(jsonstrict_utf8_len((const unsigned char *)"\x80", 1) == 0, "a lone continuation byte");
	ok(jsonstrict_utf8_len((const unsigned char *)"\xc1\xbf", 2) == 0, "overlong 2-byte");
	ok(jsonstrict_utf8_len((const unsigned char *)"\xf5\x80\x80\x80", 4) == 0, "0xf5");
	return tap_done();
}

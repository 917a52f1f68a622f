/* The MinHash signature of crawlspace.seen.shingles in one pass over the text (see that module's docstring
 * for the definition and for why this exists). The str is read in place, code point by code point, and each
 * code point is fed to the word hash as the bytes of its UTF-8 encoding ('surrogatepass': a lone surrogate is
 * its three-byte form), so no encoded copy is made whatever the text's length. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define P 0x100000001B3ULL
#define ROTATION_OFFSET 0x9E37u
#define MAX_WORDS 8 /* the ring of the last words: at least the longest shingle, a power of two */
#define MAX_PERM 4096

static const uint64_t WEIGHTS[MAX_WORDS] = {
    0x9E3779B97F4A7C15ULL, 0xC2B2AE3D27D4EB4FULL, 0x165667B19E3779F9ULL, 0xD6E8FEB86659FD93ULL,
    0xA0761D6478BD642FULL, 0xE7037ED1A0B428DBULL, 0x8EBC6AF09C88C6E3ULL, 0x589965CC75374CC3ULL,
};

static uint8_t ASCII_CODES[128]; /* the folded byte of an ASCII letter or digit, 0 outside words */

static inline uint64_t fmix64(uint64_t value) {
    value ^= value >> 33;
    value *= 0xFF51AFD7ED558CCDULL;
    value ^= value >> 33;
    value *= 0xC4CEB9FE1A85EC53ULL;
    value ^= value >> 33;
    return value;
}

typedef struct {
    uint64_t polynomial, power, length; /* the word being read */
    uint64_t ring[MAX_WORDS];           /* the last words' hashes */
    uint64_t padded[MAX_WORDS];         /* the k weights at the end, zeros before: an unrolled, branchless sum */
    Py_ssize_t words;
    int k, shift;
    uint64_t *minima;
    uint8_t *present;
} State;

static inline uint64_t shingle(const State *s, Py_ssize_t newest, int count) {
    uint64_t combined = 0;
    Py_ssize_t first = newest - count + 1 + MAX_WORDS;
    for (int offset = 0; offset < count; offset++)
        combined += s->ring[(first + offset) & (MAX_WORDS - 1)] * WEIGHTS[offset];
    return fmix64(combined);
}

static inline uint64_t full_shingle(const State *s, Py_ssize_t newest) {
    uint64_t combined = 0;
    for (int offset = 0; offset < MAX_WORDS; offset++)
        combined += s->ring[(newest + 1 + offset) & (MAX_WORDS - 1)] * s->padded[offset];
    return fmix64(combined);
}

static inline void add(State *s, uint64_t value) { /* minima start at UINT64_MAX: no branch on `present` */
    uint64_t slot = value >> s->shift;
    uint64_t minimum = s->minima[slot];
    s->minima[slot] = value < minimum ? value : minimum;
    s->present[slot] = 1;
}

static inline void end_word(State *s) {
    Py_ssize_t newest = s->words & (MAX_WORDS - 1);
    s->ring[newest] = fmix64(s->polynomial + s->length);
    if (s->words >= s->k - 1)
        add(s, full_shingle(s, newest));
    s->words++;
    s->polynomial = 0;
    s->power = 1;
    s->length = 0;
}

static inline void word_byte(State *s, uint64_t code) {
    s->polynomial += code * s->power;
    s->power *= P;
    s->length++;
}

static inline void ascii(State *s, Py_UCS4 c) {
    uint8_t code = ASCII_CODES[c];
    if (code)
        word_byte(s, code);
    else if (s->length)
        end_word(s);
}

static inline void non_ascii(State *s, Py_UCS4 c) { /* every byte of its UTF-8 form is a word byte */
    if (c < 0x800) {
        word_byte(s, 0xC0 | (c >> 6));
    } else {
        if (c < 0x10000) {
            word_byte(s, 0xE0 | (c >> 12));
        } else {
            word_byte(s, 0xF0 | (c >> 18));
            word_byte(s, 0x80 | ((c >> 12) & 0x3F));
        }
        word_byte(s, 0x80 | ((c >> 6) & 0x3F));
    }
    word_byte(s, 0x80 | (c & 0x3F));
}

#define READ_TEXT(TYPE)                                       \
    do {                                                      \
        const TYPE *chars = (const TYPE *)data;               \
        for (Py_ssize_t i = 0; i < size; i++) {               \
            Py_UCS4 c = chars[i];                             \
            if (c < 0x80)                                     \
                ascii(&s, c);                                 \
            else                                              \
                non_ascii(&s, c);                             \
        }                                                     \
    } while (0)

static PyObject *signature(PyObject *module, PyObject *args) {
    PyObject *text;
    int k;
    Py_buffer out;
    if (!PyArg_ParseTuple(args, "Uiw*:signature", &text, &k, &out))
        return NULL;
    Py_ssize_t bins = out.len / (Py_ssize_t)sizeof(uint16_t);
    if (k < 1 || k > MAX_WORDS || bins < 8 || bins > MAX_PERM || (bins & (bins - 1)) ||
        out.len != bins * (Py_ssize_t)sizeof(uint16_t)) {
        PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError, "shingle_words must be in 1..8 and out hold 8..4096 (a power of two) uint16");
        return NULL;
    }
    uint64_t minima[MAX_PERM];
    uint8_t present[MAX_PERM];
    memset(present, 0, (size_t)bins);
    int shift = 64;
    for (Py_ssize_t b = bins; b > 1; b >>= 1)
        shift--;
    State s = {.polynomial = 0, .power = 1, .length = 0, .words = 0, .k = k, .shift = shift,
               .minima = minima, .present = present};
    memset(s.ring, 0, sizeof s.ring);
    for (int offset = 0; offset < MAX_WORDS; offset++)
        s.padded[offset] = offset < MAX_WORDS - k ? 0 : WEIGHTS[offset - (MAX_WORDS - k)];
    for (Py_ssize_t slot = 0; slot < bins; slot++)
        minima[slot] = UINT64_MAX;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t size = PyUnicode_GET_LENGTH(text);
    Py_BEGIN_ALLOW_THREADS
    if (kind == PyUnicode_1BYTE_KIND)
        READ_TEXT(Py_UCS1);
    else if (kind == PyUnicode_2BYTE_KIND)
        READ_TEXT(Py_UCS2);
    else
        READ_TEXT(Py_UCS4);
    if (s.length)
        end_word(&s);
    if (s.words > 0 && s.words < k) /* fewer words than a shingle: one shingle of all of them */
        add(&s, shingle(&s, s.words - 1, (int)s.words));
    if (s.words > 0) { /* the low 16 bits; an empty bin borrows from the next non-empty one, an offset a step */
        uint16_t *values = (uint16_t *)out.buf;
        Py_ssize_t next = -1; /* the nearest non-empty bin at or after `slot`, in the doubled ring */
        for (Py_ssize_t slot = 2 * bins - 1; slot >= 0; slot--) {
            if (present[slot & (bins - 1)])
                next = slot;
            if (slot < bins) {
                uint32_t step = (uint32_t)(next - slot);
                values[slot] = (uint16_t)((uint32_t)minima[next & (bins - 1)] + step * ROTATION_OFFSET);
            }
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&out);
    return PyLong_FromSsize_t(s.words);
}

static PyMethodDef METHODS[] = {
    {"signature", signature, METH_VARARGS,
     "signature(text, shingle_words, out) -> number of words; out (num_perm uint16) holds the signature if any"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_minhash", NULL, -1, METHODS};

PyMODINIT_FUNC PyInit__minhash(void) {
    for (int c = 0; c < 128; c++)
        ASCII_CODES[c] = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ? c : (c >= 'A' && c <= 'Z') ? c + 32 : 0;
    return PyModule_Create(&MODULE);
}

/* The `forms` encoding of the columnar codec's string columns, in C.
 *
 * Two functions, each the exact equivalent of a loop in columnar.py (which stays the reference and the
 * fallback where this module is not built):
 *
 *   forms(values, affix_max) -> [literals, steps, prefixes, suffixes, residuals] | None
 *       what columnar._forms_py(values) returns, for the writer;
 *   numbered(values, affix_max) -> int
 *       how many of `values` are forms (the writer's sample, columnar._mostly_numbered);
 *   unforms(literals, steps, prefixes, suffixes, residuals, n, limit, affix_max) -> list[str] | None
 *       the reader: the n strings of a forms column (columnar._Reader.forms), or None when any of its
 *       checks fails (rows ascending below n and each an empty literal, prefixes and suffixes literal rows
 *       with at most affix_max characters together, every number in 0..limit-1): the caller then runs the
 *       Python checks, which name the problem.
 *
 * A numbered string (a "form"): at most affix_max characters, no whitespace (Py_UNICODE_ISSPACE, as the
 * regular expression's \s), an ASCII digit; its number is the longest tail of its last run of digits
 * written canonically (no leading zero) with at most 18 digits, "0" when that tail is all zeros.
 *
 * unforms() is handed the lists msgspec decoded from a file: it checks everything before it reads through an
 * index, and refuses (None) what it does not expect, so no payload makes it touch memory it does not own.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#define MAX_DIGITS 18

/* A form's split: prefix is s[:start], number s[start:end], suffix s[end:]. */
typedef struct {
    Py_ssize_t row;
    Py_ssize_t start;
    Py_ssize_t end;
} Split;

/* The scan of split_form over one storage kind: the last ASCII digit and the start of its run, or 0 at
 * the first whitespace. */
#define SCAN_KIND(TYPE)                                                                                         \
    do {                                                                                                        \
        const TYPE *c = (const TYPE *)data;                                                                     \
        for (Py_ssize_t i = 0; i < n; i++) {                                                                    \
            Py_UCS4 ch = c[i];                                                                                  \
            if (ch - '0' < 10U) {                                                                               \
                if (last != i - 1 || last < 0) {                                                                \
                    run = i;                                                                                    \
                }                                                                                               \
                last = i;                                                                                       \
            }                                                                                                   \
            else if (Py_UNICODE_ISSPACE(ch)) {                                                                  \
                return 0;                                                                                       \
            }                                                                                                   \
        }                                                                                                       \
    } while (0)

/* 1 and the split when `s` is a form, 0 when not. */
static int
split_form(PyObject *s, Py_ssize_t affix_max, Split *out)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (n > affix_max) {
        return 0;
    }
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    Py_ssize_t last = -1, run = -1;
    switch (kind) {
    case PyUnicode_1BYTE_KIND:
        SCAN_KIND(Py_UCS1);
        break;
    case PyUnicode_2BYTE_KIND:
        SCAN_KIND(Py_UCS2);
        break;
    default:
        SCAN_KIND(Py_UCS4);
        break;
    }
    if (last < 0) {
        return 0;
    }
    Py_ssize_t first = last - (MAX_DIGITS - 1);
    if (first < run) {
        first = run;
    }
    while (first < last && PyUnicode_READ(kind, data, first) == '0') {
        first++;
    }
    out->start = first;
    out->end = last + 1;
    return 1;
}

static long long
parse_number(PyObject *s, Py_ssize_t start, Py_ssize_t end)
{
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    long long v = 0;
    for (Py_ssize_t i = start; i < end; i++) {
        v = v * 10 + (long long)(PyUnicode_READ(kind, data, i) - '0');
    }
    return v;
}


/* The last number per (prefix, suffix) pair: open addressing over 64-bit keys (p << 32 | q, plus one so
 * that 0 marks an empty slot), at most half full. */
typedef struct {
    unsigned long long *keys;
    long long *values;
    size_t mask;
} LastTable;

static int
last_init(LastTable *t, Py_ssize_t entries)
{
    size_t size = 16;
    while (size < (size_t)entries * 2) {
        size <<= 1;
    }
    t->keys = PyMem_Calloc(size, sizeof(unsigned long long));
    t->values = PyMem_Calloc(size, sizeof(long long));
    t->mask = size - 1;
    if (t->keys == NULL || t->values == NULL) {
        PyMem_Free(t->keys);
        PyMem_Free(t->values);
        t->keys = NULL;
        t->values = NULL;
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void
last_free(LastTable *t)
{
    PyMem_Free(t->keys);
    PyMem_Free(t->values);
}

/* The slot of (p, q): its value is the last number when keys[slot] is set, else the slot is free. */
static size_t
last_slot(const LastTable *t, Py_ssize_t p, Py_ssize_t q)
{
    unsigned long long key = (((unsigned long long)p << 32) | (unsigned long long)q) + 1;
    size_t slot = (size_t)((key * 0x9E3779B97F4A7C15ULL) >> 20) & t->mask;
    while (t->keys[slot] != 0 && t->keys[slot] != key) {
        slot = (slot + 1) & t->mask;
    }
    return slot;
}

static void
last_set(LastTable *t, size_t slot, Py_ssize_t p, Py_ssize_t q, long long number)
{
    t->keys[slot] = (((unsigned long long)p << 32) | (unsigned long long)q) + 1;
    t->values[slot] = number;
}

/* Literal lookups by text without making the text a str: a direct-mapped cache of the literal index the
 * `where` dict gave for a text, checked against that literal's characters on every hit. */
#define TEXT_CACHE 1024

typedef struct {
    Py_ssize_t index[TEXT_CACHE]; /* -1: empty */
    PyObject *boxed[TEXT_CACHE];  /* the index as the `where` dict holds it (borrowed) */
} TextCache;

static size_t
text_hash(int kind, const void *data, Py_ssize_t start, Py_ssize_t end)
{
    Py_ssize_t n = end - start;
    size_t h = (size_t)n * 0x9E3779B1u;
    if (n > 0) {
        h ^= (size_t)PyUnicode_READ(kind, data, start) * 0x85EBCA77u;
        h ^= (size_t)PyUnicode_READ(kind, data, end - 1) * 0xC2B2AE3Du;
        h ^= (size_t)PyUnicode_READ(kind, data, start + n / 2) * 0x27D4EB2Fu;
    }
    if (n > 3) {
        h ^= (size_t)PyUnicode_READ(kind, data, start + 1) * 0x165667B1u;
        h ^= (size_t)PyUnicode_READ(kind, data, end - 2) * 0x9E3779B9u;
    }
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    return h & (TEXT_CACHE - 1);
}

static int
same_text(PyObject *literal, int kind, const void *data, Py_ssize_t start, Py_ssize_t end)
{
    if (PyUnicode_GET_LENGTH(literal) != end - start) {
        return 0;
    }
    int lkind = PyUnicode_KIND(literal);
    const void *ldata = PyUnicode_DATA(literal);
    if (lkind == kind) {
        return memcmp(ldata, (const char *)data + (size_t)start * (size_t)kind, (size_t)(end - start) * (size_t)kind) == 0;
    }
    for (Py_ssize_t i = start; i < end; i++) {
        if (PyUnicode_READ(lkind, ldata, i - start) != PyUnicode_READ(kind, data, i)) {
            return 0;
        }
    }
    return 1;
}

/* The literal index of `text`, boxed (a reference borrowed from `where`, alive while `where` is): where
 * `text` is a row's literal, else appended to `literals`. NULL on error. */
static PyObject *
literal_index(PyObject *where, PyObject *literals, PyObject *text)
{
    PyObject *found = PyDict_GetItemWithError(where, text);
    if (found != NULL || PyErr_Occurred()) {
        return found;
    }
    PyObject *boxed = PyLong_FromSsize_t(PyList_GET_SIZE(literals));
    if (boxed == NULL) {
        return NULL;
    }
    int failed = PyDict_SetItem(where, text, boxed) < 0 || PyList_Append(literals, text) < 0;
    Py_DECREF(boxed); /* `where` holds it */
    return failed ? NULL : boxed;
}

/* The literal index of s[start:end] (literal_index), through `cache`: its value, and the boxed index
 * (borrowed) in *boxed. -1 on error. */
static Py_ssize_t
literal_of(PyObject *where, PyObject *literals, TextCache *cache, PyObject *s, Py_ssize_t start, Py_ssize_t end,
           PyObject **boxed)
{
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    size_t h = text_hash(kind, data, start, end);
    Py_ssize_t hit = cache->index[h];
    if (hit >= 0 && same_text(PyList_GET_ITEM(literals, hit), kind, data, start, end)) {
        *boxed = cache->boxed[h];
        return hit;
    }
    PyObject *text = PyUnicode_Substring(s, start, end);
    if (text == NULL) {
        return -1;
    }
    PyObject *found = literal_index(where, literals, text);
    Py_DECREF(text);
    if (found == NULL) {
        return -1;
    }
    Py_ssize_t index = PyLong_AsSsize_t(found);
    if (index >= 0) {
        cache->index[h] = index;
        cache->boxed[h] = found;
        *boxed = found;
    }
    return index;
}

/* The arguments of forms() and numbered(): a list of strings and the longest form; 0, or -1 with TypeError. */
static int
values_args(const char *name, PyObject *const *args, Py_ssize_t nargs, Py_ssize_t *affix_max)
{
    if (nargs != 2 || !PyList_CheckExact(args[0])) {
        PyErr_Format(PyExc_TypeError, "%s(values: list[str], affix_max: int)", name);
        return -1;
    }
    *affix_max = PyLong_AsSsize_t(args[1]);
    return *affix_max == -1 && PyErr_Occurred() ? -1 : 0;
}

static PyObject *
cforms_forms(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Py_ssize_t affix_max;
    if (values_args("forms", args, nargs, &affix_max) < 0) {
        return NULL;
    }
    PyObject *values = args[0];
    PyObject *literals = NULL, *where = NULL, *empty = NULL;
    PyObject *steps = NULL, *prefixes = NULL, *suffixes = NULL, *residuals = NULL, *result = NULL;
    Split *splits = NULL;
    Py_ssize_t count = 0;
    LastTable table;
    int tables = 0;
    TextCache *cache = NULL;

    values = PyList_AsTuple(values); /* owned: nothing can change the strings under the loops */
    if (values == NULL) {
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(values);
    literals = PySequence_List(values);
    where = PyDict_New();
    empty = PyUnicode_New(0, 0);
    if (literals == NULL || where == NULL || empty == NULL) {
        goto done;
    }
    splits = PyMem_New(Split, n > 0 ? n : 1);
    if (splits == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* First every row's literal, so that prefixes and suffixes find them wherever they are. */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *s = PyTuple_GET_ITEM(values, i);
        if (!PyUnicode_CheckExact(s)) {
            PyErr_Format(PyExc_TypeError, "row %zd of a string column is not a str", i);
            goto done;
        }
        int is_form = split_form(s, affix_max, &splits[count]);
        if (is_form) {
            splits[count].row = i;
            count++;
            Py_INCREF(empty);
            PyList_SetItem(literals, i, empty); /* steals; releases the row's string */
        }
        else {
            PyObject *boxed = PyLong_FromSsize_t(i);
            if (boxed == NULL) {
                goto done;
            }
            PyObject *had = PyDict_SetDefault(where, s, boxed);
            Py_DECREF(boxed);
            if (had == NULL) {
                goto done;
            }
        }
    }
    if (count == 0) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    steps = PyList_New(count);
    prefixes = PyList_New(count);
    suffixes = PyList_New(count);
    residuals = PyList_New(count);
    if (steps == NULL || prefixes == NULL || suffixes == NULL || residuals == NULL) {
        goto done;
    }
    /* Until each is filled, a list's items are NULL: filled in order, so that an error leaves a valid tail. */
    if (last_init(&table, count) < 0) {
        goto done;
    }
    tables = 1;
    cache = PyMem_Malloc(sizeof(TextCache));
    if (cache == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t k = 0; k < TEXT_CACHE; k++) {
        cache->index[k] = -1;
    }
    Py_ssize_t previous_row = 0;
    for (Py_ssize_t j = 0; j < count; j++) {
        Split *f = &splits[j];
        PyObject *s = PyTuple_GET_ITEM(values, f->row);
        PyObject *pp, *qq;
        Py_ssize_t p = literal_of(where, literals, cache, s, 0, f->start, &pp);
        if (p < 0) {
            goto done;
        }
        Py_ssize_t q = literal_of(where, literals, cache, s, f->end, PyUnicode_GET_LENGTH(s), &qq);
        if (q < 0) {
            goto done;
        }
        long long number = parse_number(s, f->start, f->end);
        size_t slot = last_slot(&table, p, q);
        long long before = table.keys[slot] ? table.values[slot] : -1;
        last_set(&table, slot, p, q, number);
        PyObject *step = PyLong_FromSsize_t(f->row - previous_row);
        PyObject *rr = PyLong_FromLongLong(number - before - 1);
        if (step == NULL || rr == NULL) {
            Py_XDECREF(step);
            Py_XDECREF(rr);
            goto done;
        }
        Py_INCREF(pp);
        Py_INCREF(qq);
        PyList_SET_ITEM(steps, j, step);
        PyList_SET_ITEM(prefixes, j, pp);
        PyList_SET_ITEM(suffixes, j, qq);
        PyList_SET_ITEM(residuals, j, rr);
        previous_row = f->row;
    }
    result = PyList_New(5);
    if (result == NULL) {
        goto done;
    }
    PyObject *parts[5] = {literals, steps, prefixes, suffixes, residuals};
    for (int k = 0; k < 5; k++) {
        Py_INCREF(parts[k]);
        PyList_SET_ITEM(result, k, parts[k]);
    }
done:
    Py_DECREF(values);
    PyMem_Free(splits);
    PyMem_Free(cache);
    if (tables) {
        last_free(&table);
    }
    Py_XDECREF(literals);
    Py_XDECREF(where);
    Py_XDECREF(empty);
    Py_XDECREF(steps);
    Py_XDECREF(prefixes);
    Py_XDECREF(suffixes);
    Py_XDECREF(residuals);
    return result;
}

/* prefix + the decimal digits of `number` (0 <= number) + suffix, as a canonical str. */
static PyObject *
join_form(PyObject *prefix, long long number, PyObject *suffix)
{
    char digits[24];
    int nd = 0;
    do {
        digits[sizeof(digits) - 1 - nd++] = (char)('0' + number % 10);
        number /= 10;
    } while (number > 0);
    const char *first = digits + sizeof(digits) - nd;
    Py_ssize_t lp = PyUnicode_GET_LENGTH(prefix), ls = PyUnicode_GET_LENGTH(suffix);
    if (PyUnicode_IS_ASCII(prefix) && PyUnicode_IS_ASCII(suffix)) {
        PyObject *s = PyUnicode_New(lp + nd + ls, 127);
        if (s == NULL) {
            return NULL;
        }
        Py_UCS1 *out = PyUnicode_1BYTE_DATA(s);
        memcpy(out, PyUnicode_1BYTE_DATA(prefix), (size_t)lp);
        memcpy(out + lp, first, (size_t)nd);
        memcpy(out + lp + nd, PyUnicode_1BYTE_DATA(suffix), (size_t)ls);
        return s;
    }
    /* The widest kind of the two literals: the result is canonical, as an f-string's would be. */
    Py_UCS4 maxchar = PyUnicode_MAX_CHAR_VALUE(prefix);
    if (PyUnicode_MAX_CHAR_VALUE(suffix) > maxchar) {
        maxchar = PyUnicode_MAX_CHAR_VALUE(suffix);
    }
    PyObject *s = PyUnicode_New(lp + nd + ls, maxchar);
    if (s == NULL) {
        return NULL;
    }
    int kind = PyUnicode_KIND(s);
    void *data = PyUnicode_DATA(s);
    if (PyUnicode_CopyCharacters(s, 0, prefix, 0, lp) < 0) {
        Py_DECREF(s);
        return NULL;
    }
    for (int k = 0; k < nd; k++) {
        PyUnicode_WRITE(kind, data, lp + k, (Py_UCS4)first[k]);
    }
    if (PyUnicode_CopyCharacters(s, lp + nd, suffix, 0, ls) < 0) {
        Py_DECREF(s);
        return NULL;
    }
    return s;
}

/* None: something about the forms is not as a writer makes it (the caller's Python checks then say what). */
#define REFUSE()        \
    do {                \
        refused = 1;    \
        goto fail;      \
    } while (0)

/* The integers of `list` (exact ints, as a decoder makes them) into `out`; 0, or -1 when one is not an int or
 * is outside 0..PY_SSIZE_T_MAX (signed: outside int64), with no exception left set. Nothing is allocated
 * here, so no other code runs while the list is read. */
static int
read_ints(PyObject *list, long long *out, int is_signed)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *item = PyList_GET_ITEM(list, i);
        if (!PyLong_CheckExact(item)) {
            return -1;
        }
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
        if (overflow || (v == -1 && PyErr_Occurred()) || (!is_signed && (v < 0 || v > PY_SSIZE_T_MAX))) {
            PyErr_Clear();
            return -1;
        }
        out[i] = v;
    }
    return 0;
}

static PyObject *
cforms_unforms(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError,
                        "unforms(literals, steps, prefixes, suffixes, residuals, n, limit, affix_max)");
        return NULL;
    }
    for (int k = 0; k < 5; k++) {
        if (!PyList_CheckExact(args[k])) {
            PyErr_Format(PyExc_TypeError, "unforms: argument %d is not a list", k);
            return NULL;
        }
    }
    Py_ssize_t n = PyLong_AsSsize_t(args[5]);
    long long limit = PyLong_AsLongLong(args[6]);
    Py_ssize_t affix_max = PyLong_AsSsize_t(args[7]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (n < 0 || affix_max < 0 || limit < 1 || limit > (1LL << 62)) {
        PyErr_SetString(PyExc_ValueError, "unforms: n, limit or affix_max out of range");
        return NULL;
    }
    Py_ssize_t m = PyList_GET_SIZE(args[1]);
    for (int k = 2; k < 5; k++) {
        if (PyList_GET_SIZE(args[k]) != m) {
            Py_RETURN_NONE;
        }
    }
    int refused = 0, tables = 0;
    LastTable table;
    unsigned char *is_form = NULL;
    long long *ints = NULL;
    PyObject *literals = NULL, *out = NULL;
    /* The four integer lists, read before anything else is allocated: steps, prefixes, suffixes, residuals. */
    ints = PyMem_New(long long, 4 * (size_t)m + 1);
    if (ints == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    long long *steps = ints, *prefixes = ints + m, *suffixes = ints + 2 * m, *residuals = ints + 3 * m;
    if (read_ints(args[1], steps, 0) < 0 || read_ints(args[2], prefixes, 0) < 0 ||
        read_ints(args[3], suffixes, 0) < 0 || read_ints(args[4], residuals, 1) < 0) {
        REFUSE();
    }
    literals = PyList_AsTuple(args[0]); /* the literals, owned: nothing can change them under the loop */
    if (literals == NULL) {
        goto fail;
    }
    Py_ssize_t width = PyTuple_GET_SIZE(literals);
    if (width < n) {
        REFUSE();
    }
    for (Py_ssize_t i = 0; i < width; i++) {
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(literals, i))) {
            REFUSE();
        }
    }
    out = PyList_New(n);
    if (out == NULL) {
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *literal = PyTuple_GET_ITEM(literals, i);
        Py_INCREF(literal);
        PyList_SET_ITEM(out, i, literal);
    }
    if (m == 0) {
        goto done;
    }
    is_form = PyMem_Calloc((size_t)width, 1);
    if (is_form == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    /* The rows: ascending, below n, each an empty literal (the checks of columnar._Reader.forms). The
     * steps are rewritten in place into the rows. */
    Py_ssize_t row = 0;
    for (Py_ssize_t j = 0; j < m; j++) {
        Py_ssize_t step = (Py_ssize_t)steps[j];
        if ((j > 0 && step < 1) || step >= (j == 0 ? n : n - row)) {
            REFUSE();
        }
        row = j == 0 ? step : row + step;
        if (PyUnicode_GET_LENGTH(PyTuple_GET_ITEM(literals, row)) != 0) {
            REFUSE();
        }
        steps[j] = row;
        is_form[row] = 1;
    }
    if (last_init(&table, m) < 0) {
        goto fail;
    }
    tables = 1;
    for (Py_ssize_t j = 0; j < m; j++) {
        Py_ssize_t p = (Py_ssize_t)prefixes[j], q = (Py_ssize_t)suffixes[j];
        if (p >= width || q >= width || is_form[p] || is_form[q]) {
            REFUSE();
        }
        PyObject *prefix = PyTuple_GET_ITEM(literals, p), *suffix = PyTuple_GET_ITEM(literals, q);
        if (PyUnicode_GET_LENGTH(prefix) + PyUnicode_GET_LENGTH(suffix) > affix_max) {
            REFUSE();
        }
        long long residual = residuals[j];
        size_t slot = last_slot(&table, p, q);
        long long before = table.keys[slot] ? table.values[slot] : -1; /* a number stored below: 0..limit-1 */
        /* before + 1 + residual: before is -1..limit-1 (limit <= 2**62), residual any int64, so the sum
         * overflows only above limit, which is out of range anyway. */
        if (residual > LLONG_MAX - (before + 1) || before + 1 + residual < 0 || before + 1 + residual >= limit) {
            REFUSE();
        }
        long long number = before + 1 + residual;
        last_set(&table, slot, p, q, number);
        PyObject *text = join_form(prefix, number, suffix);
        if (text == NULL) {
            goto fail;
        }
        PyList_SetItem(out, (Py_ssize_t)steps[j], text); /* steals text; releases the empty literal */
    }
done:
    if (tables) {
        last_free(&table);
    }
    PyMem_Free(is_form);
    PyMem_Free(ints);
    Py_XDECREF(literals);
    return out;
fail:
    if (tables) {
        last_free(&table);
    }
    PyMem_Free(is_form);
    PyMem_Free(ints);
    Py_XDECREF(literals);
    Py_XDECREF(out);
    if (refused) {
        Py_RETURN_NONE;
    }
    return NULL;
}

static PyObject *
cforms_numbered(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Py_ssize_t affix_max;
    if (values_args("numbered", args, nargs, &affix_max) < 0) {
        return NULL;
    }
    Py_ssize_t count = 0;
    Split split;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(args[0]); i++) {
        PyObject *s = PyList_GET_ITEM(args[0], i);
        if (!PyUnicode_CheckExact(s)) {
            PyErr_Format(PyExc_TypeError, "row %zd of a string column is not a str", i);
            return NULL;
        }
        count += split_form(s, affix_max, &split);
    }
    return PyLong_FromSsize_t(count);
}

static PyMethodDef cforms_methods[] = {
    {"forms", (PyCFunction)(void (*)(void))cforms_forms, METH_FASTCALL,
     "forms(values, affix_max): the forms encoding of a string column, or None"},
    {"numbered", (PyCFunction)(void (*)(void))cforms_numbered, METH_FASTCALL,
     "numbered(values, affix_max): how many of the strings are forms"},
    {"unforms", (PyCFunction)(void (*)(void))cforms_unforms, METH_FASTCALL,
     "unforms(literals, steps, prefixes, suffixes, residuals, n, limit, affix_max): the n strings, or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef cforms_module = {
    PyModuleDef_HEAD_INIT, "_cforms", "The columnar codec's forms encoding, in C.", -1, cforms_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__cforms(void)
{
    return PyModule_Create(&cforms_module);
}

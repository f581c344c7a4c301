/* Profiles of any process on demand, asked for at startup:
 *
 *   -X tracemalloc_signal=SIGNAL[:INTERVAL]   PYTHONTRACEMALLOCSIGNAL
 *   -X tracemalloc_dump=PATTERN               PYTHONTRACEMALLOCDUMP
 *   -X tracemalloc_dump_over=SIZE             PYTHONTRACEMALLOCDUMPOVER
 *   -X tracemalloc_dump_on_memory_error       PYTHONTRACEMALLOCDUMPONMEMORYERROR
 *
 * Part of the engine's translation unit (Python/tracemalloc.c includes it).
 *
 * The signal option is read with the configuration, by the adapter's
 * _PyTraceMalloc_Init() (Python/tracemalloc_base313.h, _base311.h), so that
 * a bad signal name or interval stops the interpreter before anything runs,
 * with a message naming the option, as a bad -X tracemalloc_sample does.
 *
 * The handler is installed later, when the main interpreter can import:
 * Python/pylifecycle.c (patch 0009 on 3.11; 3.13's patch that owns the
 * file) calls _PyTraceMalloc_InstallStartupSignal() once, after the
 * __main__ module and the warnings are set up and before site is imported,
 * so before any code of the user runs.  It imports tracemalloc._ondemand and
 * calls its _install_at_startup(), which puts a Python-level handler on the
 * signal with signal.signal().  That is the whole mechanism: the C handler
 * of the signal module only sets a flag, and the eval loop runs the Python
 * handler at its next safe point, in the main thread; the profile is encoded
 * and written by a thread of its own.  The state machine and the files are
 * described in tracemalloc._ondemand and in Doc/library/tracemalloc.rst,
 * "Profiles of any process, on demand".
 *
 * Without the option nothing is imported, nothing is installed, and the
 * signal keeps its default action.  -E (and -I) ignore the environment
 * variables; the -X options win over them.
 */

#include "pycore_initconfig.h"     // _PyStatus_OK(), _PyStatus_ERR()

#include <signal.h>
#include <ctype.h>

/* What the signal option asked for; signum 0: nothing. */
static struct {
    int signum;
    uint64_t interval;          /* 0: the default interval */
    int exact;                  /* ":exact": trace every allocation */
    char option[200];           /* "OPTION=VALUE", for messages */
} startup_signal;

/* The value of -X NAME[=VALUE] (into BUFFER) or, unless -E, of the
   environment variable ENV: NULL when neither is given; *OPTION names the
   one found. */
static const char *
startup_option(const PyConfig *config, const wchar_t *name, const char *xname,
               const char *env, char *buffer, size_t size,
               const char **option)
{
    const char *text = NULL;
    *option = NULL;
    size_t n = wcslen(name);
    for (Py_ssize_t i = 0; i < config->xoptions.length; i++) {
        const wchar_t *x = config->xoptions.items[i];
        if (wcsncmp(x, name, n) == 0 && (x[n] == L'=' || x[n] == 0)) {
            *option = xname;
            if (x[n] == 0) {
                buffer[0] = 0;
            }
            else if (wcstombs(buffer, x + n + 1, size) >= size) {
                buffer[0] = '?';    /* too long: a bad value */
                buffer[1] = 0;
            }
            text = buffer;
        }
    }
    if (text == NULL && config->use_environment) {
        const char *value = getenv(env);
        if (value != NULL && value[0] != 0) {
            *option = env;
            text = value;
        }
    }
    return text;
}

/* The signals that the option may name (without "SIG"): those that a
   process can catch and that no one sends it by accident of its own
   execution (SIGSEGV, SIGFPE...), nor stop it for good (SIGKILL, SIGSTOP).
   A number is accepted when it is one of these, or a real-time signal. */
static const struct {
    const char *name;
    int number;
} startup_signal_names[] = {
#ifdef SIGUSR1
    {"USR1", SIGUSR1},
#endif
#ifdef SIGUSR2
    {"USR2", SIGUSR2},
#endif
#ifdef SIGHUP
    {"HUP", SIGHUP},
#endif
#ifdef SIGINT
    {"INT", SIGINT},
#endif
#ifdef SIGQUIT
    {"QUIT", SIGQUIT},
#endif
#ifdef SIGTERM
    {"TERM", SIGTERM},
#endif
#ifdef SIGALRM
    {"ALRM", SIGALRM},
#endif
#ifdef SIGURG
    {"URG", SIGURG},
#endif
#ifdef SIGWINCH
    {"WINCH", SIGWINCH},
#endif
#ifdef SIGVTALRM
    {"VTALRM", SIGVTALRM},
#endif
#ifdef SIGPROF
    {"PROF", SIGPROF},
#endif
#ifdef SIGPWR
    {"PWR", SIGPWR},
#endif
#ifdef SIGBREAK
    {"BREAK", SIGBREAK},
#endif
};

#define STARTUP_NSIGNALS \
    (sizeof(startup_signal_names) / sizeof(startup_signal_names[0]))

/* The signal that TEXT names ("USR2", "SIGUSR2", "usr2", "12"), or 0. */
static int
startup_parse_signal(const char *text, size_t length)
{
    char name[16];
    if (length == 0 || length >= sizeof(name)) {
        return 0;
    }
    for (size_t i = 0; i < length; i++) {
        name[i] = (char)toupper((unsigned char)text[i]);
    }
    name[length] = 0;
    if (isdigit((unsigned char)name[0])) {
        char *end;
        long number = strtol(name, &end, 10);
        if (*end != 0) {
            return 0;
        }
        for (size_t i = 0; i < STARTUP_NSIGNALS; i++) {
            if (startup_signal_names[i].number == number) {
                return (int)number;
            }
        }
#if defined(SIGRTMIN) && defined(SIGRTMAX)
        if (number >= SIGRTMIN && number <= SIGRTMAX) {
            return (int)number;
        }
#endif
        return 0;
    }
    const char *bare = strncmp(name, "SIG", 3) == 0 ? name + 3 : name;
    for (size_t i = 0; i < STARTUP_NSIGNALS; i++) {
        if (strcmp(startup_signal_names[i].name, bare) == 0) {
            return startup_signal_names[i].number;
        }
    }
    return 0;
}

/* Read -X tracemalloc_signal (or PYTHONTRACEMALLOCSIGNAL, unless -E) from
   CONFIG: 0, or -1 with *ERROR set to a message naming the option. */
int
_PyTraceMalloc_ReadSignalOption(const PyConfig *config, const char **error)
{
    static char message[400];
    const char *option;
    char buffer[128];
    memset(&startup_signal, 0, sizeof(startup_signal));
    const char *text = startup_option(
        config, L"tracemalloc_signal", "-X tracemalloc_signal",
        "PYTHONTRACEMALLOCSIGNAL", buffer, sizeof(buffer), &option);
    if (text == NULL) {
        return 0;
    }
    PyOS_snprintf(startup_signal.option, sizeof(startup_signal.option),
                  "%s=%.60s", option, text);
    const char *colon = strchr(text, ':');
    size_t length = colon != NULL ? (size_t)(colon - text) : strlen(text);
    int signum = startup_parse_signal(text, length);
    if (signum == 0) {
        char names[200] = "";
        for (size_t i = 0; i < STARTUP_NSIGNALS; i++) {
            size_t used = strlen(names);
            PyOS_snprintf(names + used, sizeof(names) - used, "%s%s",
                          i ? ", " : "", startup_signal_names[i].name);
        }
        PyOS_snprintf(message, sizeof(message),
                      "%s: unknown signal %.*s; expected SIGNAL or "
                      "SIGNAL:INTERVAL, SIGNAL one of %s (with or without "
                      "SIG) or its number", startup_signal.option,
                      (int)(length < 40 ? length : 40), text, names);
        *error = message;
        return -1;
    }
    if (colon != NULL) {
        const char *interval = colon + 1;
        if (strcmp(interval, "exact") == 0) {
            startup_signal.exact = 1;
        }
        else {
            const char *why;
            uint64_t value = _PyTraceMalloc_ParseSize(interval, &why);
            if (why == NULL && value > _PyTraceMalloc_SAMPLE_MAX) {
                why = "the sampling interval is too large";
            }
            if (why != NULL) {
                PyOS_snprintf(message, sizeof(message),
                              "%s: bad interval %.40s: %s, or exact",
                              startup_signal.option, interval, why);
                *error = message;
                return -1;
            }
            startup_signal.interval = value;
        }
    }
    startup_signal.signum = signum;
    return 0;
}

/* What the dump options asked for: a threshold in
   bytes (0: none), and the dump on the first MemoryError. */
static struct {
    uint64_t size;
    int memory_error;
    char option[200];           /* "OPTION=VALUE" of the threshold */
    char memory_error_option[80];
} startup_dumpover;

/* Read -X tracemalloc_dump_over=SIZE (PYTHONTRACEMALLOCDUMPOVER) and -X
   tracemalloc_dump_on_memory_error (PYTHONTRACEMALLOCDUMPONMEMORYERROR=1)
   from CONFIG: 0, or -1 with *ERROR set to a message naming the option. */
int
_PyTraceMalloc_ReadDumpOverOption(const PyConfig *config, const char **error)
{
    static char message[300];
    char buffer[64];
    const char *option;
    memset(&startup_dumpover, 0, sizeof(startup_dumpover));
    const char *text = startup_option(
        config, L"tracemalloc_dump_over", "-X tracemalloc_dump_over",
        "PYTHONTRACEMALLOCDUMPOVER", buffer, sizeof(buffer), &option);
    if (text != NULL) {
        PyOS_snprintf(startup_dumpover.option,
                      sizeof(startup_dumpover.option), "%s=%.60s", option,
                      text);
        const char *why;
        uint64_t size = _PyTraceMalloc_ParseSize(text, &why);
        if (why != NULL) {
            /* The parser speaks of sampling intervals: this is a size. */
            if (strstr(why, "at least 1 byte") != NULL) {
                why = "the size must be at least 1 byte";
            }
            else if (strstr(why, "too large") != NULL) {
                why = "the size is too large";
            }
            PyOS_snprintf(message, sizeof(message), "%s: %s",
                          startup_dumpover.option, why);
            *error = message;
            return -1;
        }
        startup_dumpover.size = size;
    }
    text = startup_option(
        config, L"tracemalloc_dump_on_memory_error",
        "-X tracemalloc_dump_on_memory_error",
        "PYTHONTRACEMALLOCDUMPONMEMORYERROR", buffer, sizeof(buffer),
        &option);
    if (text != NULL) {
        /* -X alone, or 1: on; 0: off (as PYTHONFAULTHANDLER reads). */
        if (text[0] == 0 || strcmp(text, "1") == 0) {
            startup_dumpover.memory_error = 1;
        }
        else if (strcmp(text, "0") != 0) {
            PyOS_snprintf(message, sizeof(message),
                          "%s=%.40s: expected 1 (on) or 0 (off)", option,
                          text);
            *error = message;
            return -1;
        }
        PyOS_snprintf(startup_dumpover.memory_error_option,
                      sizeof(startup_dumpover.memory_error_option), "%s",
                      option);
    }
    return 0;
}

/* Whether a dump option was given: tracing must then be on from startup
   (sampled at the default interval unless another option says how). */
int
_PyTraceMalloc_StartupDumpOver(void)
{
    return startup_dumpover.size != 0 || startup_dumpover.memory_error;
}

/* Whether a signal option was given (the hook has something to do). */
int
_PyTraceMalloc_StartupSignal(void)
{
    return startup_signal.signum;
}

/* The dump pattern that -X tracemalloc_dump or PYTHONTRACEMALLOCDUMP (unless
   -E) gives, as a new str with *OPTION set to its name; None when neither;
   NULL with an exception set. */
static PyObject *
startup_dump_pattern(const PyConfig *config, const char **option)
{
    const wchar_t *found = NULL;
    for (Py_ssize_t i = 0; i < config->xoptions.length; i++) {
        const wchar_t *x = config->xoptions.items[i];
        const wchar_t *prefix = L"tracemalloc_dump";
        size_t n = wcslen(prefix);
        if (wcsncmp(x, prefix, n) == 0 && (x[n] == L'=' || x[n] == 0)) {
            found = x[n] == 0 ? L"" : x + n + 1;
        }
    }
    if (found != NULL) {
        *option = "-X tracemalloc_dump";
        return PyUnicode_FromWideChar(found, -1);
    }
    if (config->use_environment) {
        const char *env = getenv("PYTHONTRACEMALLOCDUMP");
        if (env != NULL && env[0] != 0) {
            *option = "PYTHONTRACEMALLOCDUMP";
            return PyUnicode_DecodeFSDefault(env);
        }
    }
    *option = NULL;
    Py_RETURN_NONE;
}

/* Python/pylifecycle.c's hook, main interpreter only: install the signal
   handler that the options asked for, before site and before the user's
   code.  An option that the handler cannot use (a pattern whose directory
   does not exist) stops the interpreter with a message naming it. */
/* Say why a startup installation failed: the message of the exception
   that _install_at_startup() raised (it names the option), or OPTION and
   the exception's type for anything else (an import that failed). */
static PyStatus
startup_failed(const char *option, const char *what)
{
    static char message[600];
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException();
#else
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
#endif
    PyObject *text = NULL;
    if (exc != NULL) {
        if (PyErr_GivenExceptionMatches(exc, PyExc_ValueError)) {
            text = PyObject_Str(exc);
        }
        else {
            text = PyUnicode_FromFormat("%s: %s: %S", option,
                                        Py_TYPE(exc)->tp_name, exc);
        }
    }
    const char *utf8 = text != NULL ? PyUnicode_AsUTF8(text) : NULL;
    PyOS_snprintf(message, sizeof(message), "%s", utf8 != NULL ? utf8 : what);
    Py_XDECREF(text);
    Py_XDECREF(exc);
    PyErr_Clear();
    return _PyStatus_ERR(message);
}

/* Python/pylifecycle.c's hook, main interpreter only: install the signal
   handler and the dumps that the options asked for, before site and
   before the user's code.  An option that cannot be used (a pattern whose
   directory does not exist) stops the interpreter with a message naming
   it. */
/* The directory the interpreter started in, when the dump pattern is
   relative: "taken from the directory where the interpreter started",
   for tracemalloc.dump_over() called later too. */
static char startup_cwd[4096];

static int
startup_pattern_is_relative(const PyConfig *config)
{
    const char *option;
    char buffer[8];
    const char *text = startup_option(
        config, L"tracemalloc_dump", "-X tracemalloc_dump",
        "PYTHONTRACEMALLOCDUMP", buffer, sizeof(buffer), &option);
    return text != NULL && text[0] != '/';
}

PyObject *
_PyTraceMalloc_StartupDumpPattern(void)
{
    const char *option;
    PyObject *pattern = startup_dump_pattern(_Py_GetConfig(), &option);
    if (pattern == NULL || pattern == Py_None) {
        return pattern;
    }
    if (startup_cwd[0] != 0 && PyUnicode_GET_LENGTH(pattern) > 0
        && PyUnicode_READ_CHAR(pattern, 0) != '/') {
        /* The directory's braces are text, not fields. */
        PyObject *cwd = PyUnicode_DecodeFSDefault(startup_cwd);
        PyObject *escaped = NULL, *half = NULL;
        if (cwd != NULL) {
            half = PyObject_CallMethod(cwd, "replace", "ss", "{", "{{");
        }
        if (half != NULL) {
            escaped = PyObject_CallMethod(half, "replace", "ss", "}", "}}");
        }
        Py_XDECREF(cwd);
        Py_XDECREF(half);
        if (escaped == NULL) {
            Py_DECREF(pattern);
            return NULL;
        }
        Py_SETREF(pattern, PyUnicode_FromFormat("%U/%U", escaped, pattern));
        Py_DECREF(escaped);
        if (pattern == NULL) {
            return NULL;
        }
    }
    PyObject *result = Py_BuildValue("(Os)", pattern, option);
    Py_DECREF(pattern);
    return result;
}

PyStatus
_PyTraceMalloc_InstallStartupSignal(void)
{
    const PyConfig *config = _Py_GetConfig();
    if (startup_pattern_is_relative(config)
        && getcwd(startup_cwd, sizeof(startup_cwd)) == NULL) {
        startup_cwd[0] = 0;     /* then the directory of the call */
    }
    if (startup_signal.signum == 0 && !_PyTraceMalloc_StartupDumpOver()) {
        return _PyStatus_OK();
    }
    const char *pattern_option = NULL;
    PyObject *pattern = startup_dump_pattern(config, &pattern_option);
    if (pattern == NULL) {
        return startup_failed("-X tracemalloc_dump",
                              "cannot read the tracemalloc dump pattern");
    }
    if (startup_signal.signum != 0) {
        PyObject *result = NULL;
        PyObject *module = PyImport_ImportModule("tracemalloc._ondemand");
        if (module != NULL) {
            result = PyObject_CallMethod(
                module, "_install_at_startup", "isKiOs",
                startup_signal.signum, startup_signal.option,
                (unsigned long long)startup_signal.interval,
                startup_signal.exact, pattern, pattern_option);
            Py_DECREF(module);
        }
        if (result == NULL) {
            Py_DECREF(pattern);
            return startup_failed(
                startup_signal.option,
                "cannot install the tracemalloc signal handler");
        }
        Py_DECREF(result);
    }
    if (_PyTraceMalloc_StartupDumpOver()) {
        const char *option = startup_dumpover.size
                             ? startup_dumpover.option
                             : startup_dumpover.memory_error_option;
        PyObject *result = NULL;
        PyObject *module = PyImport_ImportModule("tracemalloc._dumpover");
        if (module != NULL) {
            result = PyObject_CallMethod(
                module, "_install_at_startup", "KsiOs",
                (unsigned long long)startup_dumpover.size, option,
                startup_dumpover.memory_error, pattern, pattern_option);
            Py_DECREF(module);
        }
        if (result == NULL) {
            Py_DECREF(pattern);
            return startup_failed(option,
                                  "cannot set the tracemalloc dump");
        }
        Py_DECREF(result);
    }
    Py_DECREF(pattern);
    return _PyStatus_OK();
}

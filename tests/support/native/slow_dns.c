/* A name resolver that does not answer, for the interrupt and deadline tests.
 *
 * Loaded with LD_PRELOAD into a real envlock process, it takes the place of the C
 * library's getaddrinfo() for host names ending in ".slow-dns.test" (a reserved top-level
 * domain): it appends the name to $SLOW_DNS_MARK (so the test waits on that event, not on
 * a sleep), then blocks for $SLOW_DNS_SECONDS (default 120) and fails with EAI_AGAIN, as a
 * lookup behind a DNS server that drops queries does. A numeric-only lookup
 * (AI_NUMERICHOST) never queries a server, so it is passed through, like every other name.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*gai_fn)(const char *, const char *, const struct addrinfo *,
                      struct addrinfo **);

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res) {
    static const char suffix[] = ".slow-dns.test";
    gai_fn real = (gai_fn)dlsym(RTLD_NEXT, "getaddrinfo");
    size_t n = node ? strlen(node) : 0, s = sizeof(suffix) - 1;
    int numeric_only = hints && (hints->ai_flags & AI_NUMERICHOST);
    if (n >= s && strcmp(node + n - s, suffix) == 0 && !numeric_only) {
        const char *mark = getenv("SLOW_DNS_MARK");
        const char *secs = getenv("SLOW_DNS_SECONDS");
        if (mark) {
            FILE *f = fopen(mark, "a");
            if (f) {
                fprintf(f, "%s\n", node);
                fclose(f);
            }
        }
        sleep(secs ? (unsigned)atoi(secs) : 120);
        return EAI_AGAIN;
    }
    return real(node, service, hints, res);
}

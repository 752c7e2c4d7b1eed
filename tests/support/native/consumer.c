/* A library that needs others by soname, as libtorch_cuda.so does; how it finds them
 * (DT_RUNPATH or DT_RPATH) is chosen at link time by the tests. */
int envlock_consumer_marker(void) { return 7; }

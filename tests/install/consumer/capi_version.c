/* The C API as a C program links it: the library's version is the header's. */
#include <stdio.h>
#include "gpuscan_capi.h"
int main(void) {
  printf("gpuscan_capi_version() = %d (header %d)\n", gpuscan_capi_version(), GPUSCAN_CAPI_VERSION);
  return gpuscan_capi_version() == GPUSCAN_CAPI_VERSION ? 0 : 1;
}

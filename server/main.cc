// gpuscan-server.
#include "server_main.h"

int main(int argc, char** argv) { return gpuscan::server::RunServerMain(argc, argv); }

// gpuscan-server's whole program, callable from another main (the tests' fault-injecting worker).
#pragma once

namespace gpuscan::server {

int RunServerMain(int argc, char** argv);

}  // namespace gpuscan::server

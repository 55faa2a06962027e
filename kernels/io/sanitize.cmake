# The manifest of the sanitizer tree (in place of the one `python -m clustertune.build`
# writes): the I/O server and its fuzzer only, OpenMPI, with -DCT_SANITIZE=ON:
#   cmake -S kernels -B build/sanitize -DCT_MPI=openmpi -DCT_SANITIZE=ON \
#         -DCT_MANIFEST=$PWD/kernels/io/sanitize.cmake
set(CT_KERNEL_DIRS io)
set(CT_KERNELS ct-io-server ct-io-fuzz)

// tracepack C++ runtime: the .tpk container (spec §1) and its compression (spec §8).
//
// A fixed 48-byte little-endian header, then the payload. Reading checks, in the spec's order (§1.3):
// size, magic, header checksum, container version, header size, codec, compression, flags, lengths, the
// payload checksum, the size budgets, and only then decompresses, never past the declared raw length.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tracepack/error.hpp"
#include "tracepack/limits.hpp"

namespace tracepack {

inline constexpr std::size_t kHeaderSize = 48;
inline constexpr std::uint16_t kContainerVersion = 1;

// Codec ids (spec §1.2) and their names.
enum class Codec : std::uint8_t { json = 0, msgpack = 1, flatbuffers_rows = 2, columnar = 3, flatbuffers_columns = 4 };
const char* codec_name(std::uint8_t id) noexcept;  // nullptr for an unknown id

// Header flag bit 0: a block table (one CRC-32 per block of the stored payload) follows the payload (§1.5).
constexpr std::uint16_t kFlagBlockChecksums = 1;

struct Header {
    std::uint16_t container_version = 0;
    std::uint16_t header_size = 0;
    std::uint16_t major = 0;
    std::uint16_t minor = 0;
    std::uint8_t codec = 0;
    std::uint8_t compression = 0;
    std::uint16_t flags = 0;
    std::uint32_t dict_id = 0;
    std::uint64_t payload_length = 0;
    std::uint64_t raw_length = 0;
    std::uint32_t payload_crc32 = 0;
};

// Where the built-in zstd dictionaries are (spec §8.2): a folder of `NAME.dict` files.
struct DictionaryFolder {
    std::string path;
    // A dictionary the user gave (`--zstd-dict FILE`, spec §8.3): used instead of the built-in one.
    bool has_user = false;
    std::string user;
};

// Decode and check the header at the start of `data` (spec §1.1-§1.3). `accepted_flags`: the flag bits
// the caller implements (the lazy reader: bit 0, block checksums, §1.5); any other bit is refused.
bool read_header(std::string_view data, Header& header, Error& error, std::uint16_t accepted_flags = 0);

// Check a whole container and give its payload, decompressed into `storage` when it is compressed
// (`payload` then views `storage`; otherwise it views `data`).
bool unpack(std::string_view data, const Limits& limits, const DictionaryFolder& dictionaries, Header& header,
            std::string& storage, std::string_view& payload, Error& error);

// Python's bytes.lstrip()/describe(): what a file that is not a container looks like (spec §1.3).
std::string describe_content(std::string_view data);

}  // namespace tracepack

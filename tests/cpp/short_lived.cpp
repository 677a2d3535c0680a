// short_lived.cpp: a small block that lives and dies before a large one is allocated,
// both in the same clock tick, then a second large block kept to the end. A timeline's
// point keeps the moment its total was highest: the small block is not live at any of
// them, and the timeline's series for Small is 0 throughout, though its peak is 1 KiB.
struct Small {
  char bytes[1024];
};
struct Large {
  char bytes[64 * 1024];
};

int main() {
  Small* small = new Small{};
  small->bytes[0] = 1;
  delete small;
  Large* large = new Large{};
  large->bytes[0] = 2;
  delete large;
  Large* kept = new Large{};
  kept->bytes[0] = 3;
  return kept->bytes[0] == 3 ? 0 : 1;
}

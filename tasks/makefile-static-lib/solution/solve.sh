#!/bin/bash
set -e

cd /app/mathx && ls -R && cat build.sh

cd /app/mathx && grep -n '#include "' src/*.c

cd /app/mathx && sh build.sh && ./mathx < data/input.txt && rm -f mathx

cat > /app/mathx/Makefile <<'MK'
CC ?= gcc
CFLAGS ?= -Wall -O2
CFLAGS += -MMD -MP
PREFIX ?= /usr/local
BUILD := build
LIB_OBJS := $(BUILD)/vec.o $(BUILD)/stats.o
OBJS := $(LIB_OBJS) $(BUILD)/main.o
.PHONY: all check install clean
all: $(BUILD)/mathx
$(BUILD):
	mkdir -p $@
$(BUILD)/%.o: src/%.c | $(BUILD)
	$(CC) $(CFLAGS) -c $< -o $@
$(BUILD)/libmathx.a: $(LIB_OBJS)
	rm -f $@
	ar rcs $@ $^
$(BUILD)/mathx: $(BUILD)/main.o $(BUILD)/libmathx.a
	$(CC) $(CFLAGS) -o $@ $< -L$(BUILD) -lmathx -lm
check: $(BUILD)/mathx
	./$(BUILD)/mathx < data/input.txt | diff -u data/expected.txt -
install: $(BUILD)/mathx
	install -d $(PREFIX)/bin $(PREFIX)/lib $(PREFIX)/include
	install -m 755 $(BUILD)/mathx $(PREFIX)/bin/mathx
	install -m 644 $(BUILD)/libmathx.a $(PREFIX)/lib/libmathx.a
	install -m 644 src/vec.h src/stats.h $(PREFIX)/include/
clean:
	rm -rf $(BUILD)
-include $(OBJS:.o=.d)
MK

cd /app/mathx && make clean && make && ar t build/libmathx.a

cd /app/mathx && ./build/mathx < data/input.txt > data/expected.txt && cat data/expected.txt

cd /app/mathx && make check && make && touch src/stats.h && make

cd /app/mathx && make install PREFIX=/tmp/mathx-inst && ls -R /tmp/mathx-inst

#!/bin/sh
echo "hello from greet"

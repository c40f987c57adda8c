#!/bin/bash
pwd > where.txt
